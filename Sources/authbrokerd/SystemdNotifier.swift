#if canImport(Glibc)
import Glibc
#endif

/// Tells the service manager about the daemon's state (sd_notify(3)): one datagram per
/// message to `$NOTIFY_SOCKET`, written here rather than linking libsystemd.
///
/// Outside systemd (no `NOTIFY_SOCKET`) every call does nothing.
struct SystemdNotifier: Sendable {
    /// The socket address: a path, or `@name` for a socket in the abstract namespace.
    let address: String?

    init(environment get: (String) -> String?) {
        let value = get("NOTIFY_SOCKET")
        address = (value?.isEmpty ?? true) ? nil : value
    }

    /// The daemon accepts connections (also sent after a reload, which ends it).
    func ready(status: String) {
        send("READY=1\nSTATUS=\(status)")
    }

    /// A reload begins. MONOTONIC_USEC is what `Type=notify-reload` (systemd 253+) requires
    /// with RELOADING=1 to match it to the reload request; older managers ignore it.
    func reloading() {
        send("RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())")
    }

    /// Shutdown begins.
    func stopping(status: String) {
        send("STOPPING=1\nSTATUS=\(status)")
    }

    /// Sends one message; false when there is no manager to tell or it could not be told.
    @discardableResult
    func send(_ message: String) -> Bool {
        guard let address else { return false }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var name = Array(address.utf8)
        let abstract = name.first == UInt8(ascii: "@")
        if abstract { name[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        // A path needs room for its NUL; an abstract name is counted by length, not NUL.
        guard name.count < capacity || (abstract && name.count <= capacity) else { return false }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: name)
        }
        let length = MemoryLayout<sa_family_t>.size + name.count + (abstract ? 0 : 1)

        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &addr) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                sendto(fd, &bytes, bytes.count, Int32(MSG_NOSIGNAL), sa, socklen_t(length))
            }
        }
        return sent == bytes.count
    }

    static func monotonicMicroseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000 + UInt64(ts.tv_nsec) / 1_000
    }
}
