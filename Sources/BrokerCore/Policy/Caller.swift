/// Who is asking: the peer of a socket connection, as the kernel reports it (SO_PEERCRED)
/// and as /proc showed it when the connection was accepted.
public struct Caller: Sendable, Equatable, CustomStringConvertible {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The executable (`/proc/PID/exe`), or nil when it could not be read.
    public var executable: String?
    /// The cgroup path (`/proc/PID/cgroup`, unified hierarchy), or nil.
    public var cgroup: String?

    public init(uid: UInt32, gid: UInt32, pid: Int32, executable: String?, cgroup: String?) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.executable = executable
        self.cgroup = cgroup
    }

    /// The systemd unit the caller runs in (`app-foo.scope`, `bar.service`), from its cgroup.
    public var unit: String? {
        guard let cgroup else { return nil }
        return cgroup.split(separator: "/").last(where: { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }).map(String.init)
    }

    public var description: String { "\(executable ?? "unknown executable") (pid \(pid))" }
}
