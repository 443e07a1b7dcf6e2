#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import NIOCore

/// The peer of a connection as the kernel reports it: SO_PEERCRED, and SO_PEERPIDFD (a
/// handle on the connecting process itself, Linux 6.5+) when the kernel has it.
enum PeerCredentials {
    /// `struct ucred` (12 bytes): Glibc does not export it to Swift.
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// `SO_PEERPIDFD` (Linux 6.5); Glibc's headers may not have it yet.
    static let peerPIDFD: Int32 = 77

    /// The connecting process's credentials, or nil when the kernel would not say. Call on
    /// the channel's event loop.
    static func credentials(of channel: any Channel) -> UCred? {
        let answer: Result<UCred, any Error>? = socketOption(SO_PEERCRED, of: channel)
        guard case .success(let cred) = answer, cred.pid > 0 else { return nil }
        return cred
    }

    /// The same, read from a socket the daemon holds itself (the front door's, before NIO has it).
    static func credentials(ofDescriptor fd: CInt) -> UCred? {
        var cred = UCred()
        var length = socklen_t(MemoryLayout<UCred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0, cred.pid > 0 else { return nil }
        return cred
    }

    /// The daemon's own uid, the only one served: read once, not at every accept.
    static let daemonUID = getuid()

    /// A `SOL_SOCKET` option of the channel's socket, read through NIO (which keeps the
    /// descriptor to itself); nil when the channel has no socket. Call on the channel's
    /// event loop: NIO then answers with a future completed already.
    private static func socketOption<Value: Sendable>(_ name: Int32, of channel: any Channel) -> Result<Value, any Error>? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<Value> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(name))
        var answer: Result<Value, any Error>?
        future.assumeIsolated().whenComplete { answer = $0 }
        return answer
    }

    /// A pidfd for the connecting process: `.some(fd)`, `.gone` when the kernel has
    /// SO_PEERPIDFD but the process has exited, `.unsupported` on older kernels.
    enum PIDFD { case some(CInt), gone, unsupported }

    static func pidfd(of channel: any Channel) -> PIDFD {
        let answer: Result<CInt, any Error>? = socketOption(peerPIDFD, of: channel)
        switch answer {
        case .success(let fd): return fd >= 0 ? .some(fd) : .gone
        case .failure(let error):
            // ENOPROTOOPT (or EINVAL): an older kernel. Anything else: no such process now.
            if let io = error as? IOError, io.errnoCode != ENOPROTOOPT, io.errnoCode != EINVAL { return .gone }
            return .unsupported
        case nil: return .unsupported
        }
    }

    /// `SCM_CREDENTIALS`, from an enum in Glibc's headers.
    static let credentialsMessage: Int32 = 2

    /// What the kernel says of the first unread byte of a socket with `SO_PASSCRED`.
    enum FirstWriter {
        /// The writer's process (thread group) id and uid, as the daemon sees them.
        case writer(pid: Int32, uid: UInt32)
        /// Nothing to read (or the end of the stream).
        case empty
        /// A byte without credentials: `SO_PASSCRED` is off on this socket.
        case noCredentials
        case failed
    }

    /// Peeks at the first unread byte of `fd` for its writer (`SCM_CREDENTIALS`), without
    /// taking it and without blocking.
    static func firstWriter(_ fd: CInt) -> FirstWriter {
        var byte: UInt8 = 0
        // cmsghdr (16 bytes) and ucred (12): CMSG_SPACE(12) is 32; 8-aligned as cmsghdr is.
        var control: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &byte) { data in
            withUnsafeMutableBytes(of: &control) { control in
                var iov = iovec(iov_base: data.baseAddress, iov_len: 1)
                return withUnsafeMutablePointer(to: &iov) { iov in
                    var message = msghdr()
                    message.msg_iov = iov
                    message.msg_iovlen = 1
                    message.msg_control = control.baseAddress
                    message.msg_controllen = control.count
                    let n = recvmsg(fd, &message, CInt(MSG_PEEK) | CInt(MSG_DONTWAIT))
                    if n == 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) { return .empty }
                    guard n > 0 else { return .failed }
                    // Each cmsghdr: cmsg_len (size_t), cmsg_level, cmsg_type (int); data at 16.
                    var offset = 0
                    while offset + 16 <= message.msg_controllen {
                        let length = control.load(fromByteOffset: offset, as: Int.self)
                        let level = control.load(fromByteOffset: offset + 8, as: Int32.self)
                        let type = control.load(fromByteOffset: offset + 12, as: Int32.self)
                        guard length >= 16, offset + length <= message.msg_controllen else { break }
                        if level == SOL_SOCKET, type == credentialsMessage, length >= 16 + 12 {
                            return .writer(pid: control.load(fromByteOffset: offset + 16, as: Int32.self),
                                           uid: control.load(fromByteOffset: offset + 20, as: UInt32.self))
                        }
                        offset += (length + 7) & ~7
                    }
                    return .noCredentials
                }
            }
        }
    }

    /// Whether the process behind `pidfd` still runs: a pidfd turns readable when it exits.
    static func isAlive(_ pidfd: CInt) -> Bool {
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 0
    }

    /// The process's start time in clock ticks after boot (field 22 of /proc/PID/stat),
    /// which tells one process from a later one given the same pid.
    static func startTime(of pid: Int32) -> UInt64? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { buffer -> UInt64? in
            let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            let n = read(fd, buffer.baseAddress, buffer.count)
            guard n > 0 else { return nil }
            let text = buffer[0..<n]
            // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
            guard let paren = text.lastIndex(of: UInt8(ascii: ")")) else { return nil }
            let fields = text[(paren + 1)...].split(separator: UInt8(ascii: " "))
            guard fields.count > 19 else { return nil }
            return UInt64(String(decoding: fields[19], as: UTF8.self))  // fields[0] is field 3
        }
    }

    /// Where a symbolic link (`/proc/PID/exe`, `/proc/self/fd/N`) points, or nil.
    static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The unified-hierarchy cgroup path (`0::/user.slice/…`).
    static func cgroup(of pid: Int32) -> String? {
        guard let f = fopen("/proc/\(pid)/cgroup", "r") else { return nil }
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("0::") { return String(text.dropFirst(3)).trimmingNewline }
        }
        return nil
    }

    /// The mount and user namespaces of `pid`, or nil when they cannot be read.
    static func namespaces(of pid: String) -> [FileID]? {
        guard let mnt = FileID(path: "/proc/\(pid)/ns/mnt", stamped: false),
              let user = FileID(path: "/proc/\(pid)/ns/user", stamped: false) else { return nil }
        return [mnt, user]
    }

    /// The user's own namespaces: those of the process that started the daemon (the user
    /// manager under systemd, whose service sandbox gives the daemon namespaces of its
    /// own), when it is the user's and readable; the daemon's own otherwise. Read at start.
    static let userNamespaces: [FileID]? = {
        let parent = getppid()
        var st = stat()
        if parent > 1, stat("/proc/\(parent)", &st) == 0, st.st_uid == getuid(), let ns = namespaces(of: String(parent)) {
            return ns
        }
        return namespaces(of: "self")
    }()
}

private extension String {
    var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
