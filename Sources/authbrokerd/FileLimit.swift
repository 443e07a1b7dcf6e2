#if canImport(Glibc)
import Glibc
#endif

/// Each connection holds a file descriptor, and Linux starts services with a soft limit of
/// 1024 open files (systemd's default) although the hard limit is usually far higher.
/// systemd asks programs that need more, and that do not use select(2), to raise the soft
/// limit themselves: the daemon raises it to what `max_connections` needs, never past the
/// hard limit.
enum FileLimit {
    /// Descriptors the daemon needs besides connections: the listener, epoll, the loop's
    /// wake-ups, D-Bus, provider requests and a sign-in's loopback listener.
    static let reserve = 128

    /// Raises the soft limit for `connections`; returns how many connections the limit now
    /// allows, if fewer than asked.
    static func raise(for connections: Int) -> Int? {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        let needed = rlim_t(connections + reserve)
        if limit.rlim_cur < needed {
            var raised = limit
            raised.rlim_cur = min(needed, limit.rlim_max)
            // Under a seccomp filter that forbids setrlimit the soft limit stays where it is.
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        let allowed = Int(limit.rlim_cur) - reserve
        return allowed < connections ? max(allowed, 1) : nil
    }
}
