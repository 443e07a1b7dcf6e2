#if canImport(Glibc)
import Glibc
#endif

/// The listening socket systemd passes to a socket-activated daemon (sd_listen_fds(3)):
/// fd 3, announced by `LISTEN_FDS` and `LISTEN_PID`.
enum SocketActivation {
    /// The first passed descriptor, by the protocol's definition.
    static let firstDescriptor: CInt = 3

    /// An inherited listening socket and the path it is bound to.
    struct Listener {
        let descriptor: CInt
        /// The socket's path as the kernel reports it; nil for an abstract or unnamed socket.
        let path: String?
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The socket systemd passed to this process, or nil when it was not socket-activated.
    ///
    /// Removes `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` from the environment either
    /// way, so that nothing the daemon starts believes the socket is meant for it.
    static func take(environment get: (String) -> String?) throws(Failure) -> Listener? {
        let pid = get("LISTEN_PID")
        let count = get("LISTEN_FDS")
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard let pid, let count, let forPID = Int32(pid), forPID == getpid() else { return nil }
        guard let n = Int(count), n >= 1 else { return nil }
        guard n == 1 else {
            throw Failure(description: "systemd passed \(n) sockets, but authbrokerd serves one: give authbroker.socket a single ListenStream=")
        }
        let fd = firstDescriptor
        guard isListeningUnixStream(fd) else {
            throw Failure(description: "the socket systemd passed (fd 3) is not a listening Unix stream socket: set ListenStream= to a path in authbroker.socket")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return Listener(descriptor: fd, path: boundPath(fd))
    }

    private static func isListeningUnixStream(_ fd: CInt) -> Bool {
        func option(_ name: Int32) -> CInt? {
            var value: CInt = 0
            var size = socklen_t(MemoryLayout<CInt>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &size) == 0 ? value : nil
        }
        return option(SO_TYPE) == CInt(SOCK_STREAM.rawValue)
            && option(SO_ACCEPTCONN) == 1
            && option(SO_DOMAIN) == AF_UNIX
    }

    private static func boundPath(_ fd: CInt) -> String? {
        var addr = sockaddr_un()
        var size = socklen_t(MemoryLayout<sockaddr_un>.size)
        let r = withUnsafeMutablePointer(to: &addr) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) }
        }
        guard r == 0 else { return nil }
        let length = Int(size) - MemoryLayout<sa_family_t>.size
        guard length > 1 else { return nil }
        return withUnsafeBytes(of: &addr.sun_path) { raw -> String? in
            let bytes = raw.prefix(length)
            guard let first = bytes.first, first != 0 else { return nil }  // abstract namespace
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
