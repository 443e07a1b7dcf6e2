/// Who is asking: the peer of a socket connection, as the kernel reports it (SO_PEERCRED)
/// and as /proc showed it (read when a policy first needs it, re-checked on every request).
public struct Caller: Sendable, Equatable, CustomStringConvertible {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The executable's path (`/proc/PID/exe`), for messages only, or nil when it could not
    /// be read. Rules match ``executableID``: a path can be bind-mounted over.
    public var executable: String?
    /// The file the process runs: device, inode and inode birth (a statx through
    /// `/proc/PID/exe`), read again on every request the policy decides.
    public var executableID: FileID?
    /// The cgroup path (`/proc/PID/cgroup`, unified hierarchy), or nil.
    public var cgroup: String?
    /// Whether the caller's mount and user namespaces are the user's own (those the daemon
    /// was started in); nil when they could not be read.
    public var inUserNamespaces: Bool?
    /// The process's start time (`/proc/PID/stat`, clock ticks since boot), read with the
    /// rest at accept: with the pid, this very process, whatever pid reuse does later (a
    /// forwarded caller's lease holds for its ssh process only). nil when not read.
    public var startTime: UInt64?

    public init(uid: UInt32, gid: UInt32, pid: Int32, executable: String?, executableID: FileID? = nil,
                cgroup: String?, inUserNamespaces: Bool? = true, startTime: UInt64? = nil) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.executable = executable
        self.executableID = executableID
        self.cgroup = cgroup
        self.inUserNamespaces = inUserNamespaces
        self.startTime = startTime
    }

    /// The systemd unit the caller runs in (`app-foo.scope`, `bar.service`), from its cgroup.
    public var unit: String? {
        guard let cgroup else { return nil }
        return cgroup.split(separator: "/").last(where: { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }).map(String.init)
    }

    public var description: String { "\(executable ?? "unknown executable") (pid \(pid))" }
}
