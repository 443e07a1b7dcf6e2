#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import NIOCore

/// The peer of a connection: SO_PEERCRED from the kernel, and the executable and cgroup
/// read from /proc when the connection is accepted (a process that execs afterwards keeps
/// the identity it connected with).
enum PeerCredentials {
    /// `struct ucred` (12 bytes): Glibc does not export it to Swift.
    struct UCred: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    /// The caller on `channel`, or nil when the kernel would not say. Call on its event loop.
    static func caller(of channel: any Channel) -> Caller? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<UCred> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        var cred: UCred?
        future.whenSuccess { cred = $0 }
        guard let cred, cred.pid > 0 else { return nil }
        return Caller(uid: cred.uid, gid: cred.gid, pid: cred.pid,
                      executable: executable(of: cred.pid), cgroup: cgroup(of: cred.pid))
    }

    static func executable(of pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
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
}

private extension String {
    var trimmingNewline: String { hasSuffix("\n") ? String(dropLast()) : self }
}
