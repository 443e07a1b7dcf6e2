#if canImport(Glibc)
import Glibc
#endif

/// A connected `AF_UNIX` stream socket, closed when the last reference goes away.
///
/// Plain POSIX calls rather than NIO or Foundation: `authctl token` connects, writes one
/// line and reads one line, and every library loaded at start-up is time the caller of
/// `$(authctl token …)` waits for.
final class UnixSocket {
    private let fd: Int32
    /// The path connected to, for error messages.
    let path: String

    /// Connects to the socket at `path`.
    ///
    /// `ENOENT` and `ECONNREFUSED` mean nothing listens there and become
    /// ``ClientError/daemonNotRunning(path:)``; every other failure is
    /// ``ClientError/cannotConnect(path:reason:)``.
    init(connectingTo path: String) throws(ClientError) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, !bytes.contains(0) else {
            throw .cannotConnect(path: path, reason: "that is not a usable socket path")
        }
        // sun_path must keep a terminating NUL: 107 bytes at most on Linux.
        guard bytes.count < capacity else {
            throw .cannotConnect(path: path, reason: "the path is longer than the \(capacity - 1) bytes a Unix socket address can hold")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw .cannotConnect(path: path, reason: "cannot create a Unix socket: \(UnixSocket.reason(errno))")
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.size)
        var code: Int32 = 0
        var interrupted = false
        while true {
            let result = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
            }
            code = result == 0 ? 0 : errno
            // A connect interrupted by a signal goes on in the kernel; retrying it then
            // reports EISCONN once it has completed.
            if code == EISCONN && interrupted { code = 0 }
            guard code == EINTR else { break }
            interrupted = true
        }
        if code != 0 {
            close(fd)
            switch code {
            case ENOENT, ECONNREFUSED:
                throw .daemonNotRunning(path: path)
            default:
                throw .cannotConnect(path: path, reason: UnixSocket.reason(code))
            }
        }
        // Before anything is sent: the socket's folder may be another user's, and whoever
        // listens there would read the request (a client secret, for `set-secret`).
        if let reason = UnixSocket.foreignServer(fd) {
            close(fd)
            throw .cannotConnect(path: path, reason: reason)
        }
        self.fd = fd
        self.path = path
    }

    deinit {
        close(fd)
    }

    /// Writes all of `bytes`, however many `send` calls that takes.
    ///
    /// `MSG_NOSIGNAL`: a daemon that went away must give the caller an error, not kill it
    /// with `SIGPIPE`.
    func sendAll(_ bytes: [UInt8]) throws(ClientError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                send(fd, raw.baseAddress.map { $0 + sent }, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                throw .io("cannot write to \(path): \(UnixSocket.reason(code))")
            }
            sent += n
        }
    }

    /// Reads what is available (at most one chunk) and appends it to `buffer`.
    ///
    /// Waits for data until `deadline` (a ``now()``), or without limit when it is nil.
    /// - Returns: the number of bytes appended; 0 means the peer closed the connection.
    /// - Throws: ``ClientError/timedOut(method:after:)`` when the deadline passes first.
    func receive(
        appendingTo buffer: inout [UInt8],
        deadline: Duration?,
        method: String,
        timeout: Duration?
    ) throws(ClientError) -> Int {
        if let deadline, let timeout {
            try waitReadable(until: deadline, method: method, timeout: timeout)
        }
        // 16 KB fits the heap a process starts with; 64 KB made malloc grow it and give it
        // back (two brk calls). Longer lines take more reads.
        let chunkSize = 16 * 1024
        while true {
            let n = withUnsafeTemporaryAllocation(byteCount: chunkSize, alignment: 1) { chunk -> Int in
                let n = read(fd, chunk.baseAddress, chunkSize)
                if n > 0 { buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n])) }
                return n
            }
            if n >= 0 { return n }
            let code = errno
            if code == EINTR { continue }
            throw .io("cannot read from \(path): \(UnixSocket.reason(code))")
        }
    }

    /// Now on CLOCK_BOOTTIME, the clock `ContinuousClock` reads on Linux, as time since boot.
    ///
    /// Deadlines are kept as this `Duration` rather than a `ContinuousClock.Instant`: the
    /// Instant's layout is resilient, and its first use makes the runtime build
    /// `Optional<Instant>`'s metadata, a tenth of an `authctl token` process (docs/performance.md).
    static func now() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_BOOTTIME, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    private func waitReadable(until deadline: Duration, method: String, timeout: Duration) throws(ClientError) {
        while true {
            let left = deadline - UnixSocket.now()
            guard left > .zero else { throw .timedOut(method: method, after: timeout) }
            let (seconds, attoseconds) = left.components
            // Round up so that a sub-millisecond remainder still waits instead of spinning.
            let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&pfd, 1, Int32(clamping: millis))
            if n > 0 { return }  // readable, hung up or in error: read() tells which
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                throw .io("cannot wait for data on \(path): \(UnixSocket.reason(code))")
            }
        }
    }

    /// Why the process listening on `fd` is not to be trusted (it runs as another user, or
    /// the kernel would not say who it is), or nil when it runs as this process's user.
    private static func foreignServer(_ fd: Int32) -> String? {
        // `struct ucred` (pid, uid, gid): Glibc does not export it to Swift.
        var cred: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: cred))
        let me = geteuid()
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 else {
            return "cannot tell which user serves this socket (\(reason(errno))), so nothing was sent"
        }
        guard cred.uid == me else {
            return "the socket is served by uid \(cred.uid), not by you (uid \(me)), so nothing was sent"
        }
        return nil
    }

    static func reason(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}
