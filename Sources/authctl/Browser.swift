#if canImport(Glibc)
import Glibc
#endif

/// Opens URLs in the user's browser when there is a desktop session to show one.
enum Browser {
    /// Starts `xdg-open URL` (not waiting for it) when DISPLAY or WAYLAND_DISPLAY is set;
    /// false when there is no desktop or xdg-open could not be started.
    static func open(_ url: String) -> Bool {
        guard getenv("DISPLAY") != nil || getenv("WAYLAND_DISPLAY") != nil else { return false }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var pid: pid_t = 0
        let args: [UnsafeMutablePointer<CChar>?] = [strdup("xdg-open"), strdup(url), nil]
        defer { args.forEach { free($0) } }
        return posix_spawnp(&pid, "xdg-open", &actions, nil, args, environ) == 0
    }
}
