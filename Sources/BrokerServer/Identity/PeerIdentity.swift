#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging
import NIOCore

/// The process at the other end of one connection, bound to the process that connected.
///
/// SO_PEERCRED's uid is read at accept, always (only the daemon's user is served). The rest
/// (executable, namespaces, start time, cgroup) is read only when an `[[allow]]` policy is
/// in force at accept (the executable and namespaces through `ProcessInspector`), and
/// `WriterCheck` then lets through only what the connecting process writes. Every request that needs the policy checks, for a few microseconds, that the
/// process is still the one that connected (same process, same start time, same executable
/// file); one that ran another program since, or a sibling holding the socket after it
/// exited, loses the connection, and so does a connection opened before a reload brought
/// rules in (nobody checked who wrote on it). Used on the channel's event loop only.
final class PeerIdentity {
    let credentials: PeerCredentials.UCred?
    private let channel: any Channel
    /// Reads the process's executable and namespaces (directly, or through the helper).
    private let inspector: ProcessInspector
    private var pidfd: CInt = -1
    /// Why the caller could not be identified at accept, when it could not.
    private var unidentified: BrokerError?
    private var caller: Caller?
    private var startTime: UInt64?
    private var read = false
    /// Whether `WriterCheck` guards the connection: set at accept under rules.
    private var writersChecked = false
    /// Set when the process no longer is the one that connected; the connection then closes.
    private(set) var changed = false

    /// The file the connecting process runs, when it was read (rules were in force at
    /// accept): what the request counts against (`ProgramShare`).
    var executableID: FileID? { caller?.executableID }

    init(channel: any Channel, credentials: PeerCredentials.UCred?, inspector: ProcessInspector = .direct) {
        self.channel = channel
        self.credentials = credentials
        self.inspector = inspector
    }

    deinit {
        if pidfd >= 0 { close(pidfd) }
    }

    /// Reads the identity now, as close to the connect as the daemon can, and lets only
    /// that process's bytes through from now on (`WriterCheck`). Call in `channelActive`.
    /// - Parameter descriptor: the connection's socket (`Handover.descriptor`), where the
    ///   writer check peeks; without it nothing the connection sends passes a policy.
    func bind(descriptor: CInt?, needsCgroup: Bool, logger: Logger, counters: BrokerCounters, codec: RPCCodec) {
        guard !read, let cred = credentials else { return }
        read = true
        writersChecked = WriterCheck.install(on: channel, descriptor: descriptor, pid: cred.pid, uid: cred.uid, logger: logger, counters: counters,
                                                 codec: codec)
        switch PeerCredentials.pidfd(of: channel) {
        case .some(let fd): pidfd = fd
        case .gone: return  // exited already: whatever holds the socket now is no one we know
        case .unsupported: break
        }
        let pid = cred.pid
        guard let start = PeerCredentials.startTime(of: pid) else { return }
        let view = inspector.view(of: pid, namespaces: true)
        guard let exe = view.executableID else {
            if view.failure == ProcessInspector.helperGone { inspector.logSilence(logger) }
            unidentified = Self.unidentifiedError(view.failure)
            return
        }
        let home = PeerCredentials.userNamespaces
        let found = Caller(uid: cred.uid, gid: cred.gid, pid: pid, executable: view.executable,
                           executableID: exe, cgroup: needsCgroup ? PeerCredentials.cgroup(of: pid) : nil,
                           inUserNamespaces: view.namespaces.flatMap { ns in home.map { $0 == ns } }, startTime: start)
        // What /proc showed belongs to the connecting process only if it still runs now
        // (with a pidfd) or still has the start time read first (without: pid reuse).
        guard pidfd >= 0 ? PeerCredentials.isAlive(pidfd) : PeerCredentials.startTime(of: pid) == start else { return }
        startTime = start
        caller = found
    }

    /// The caller, for a policy decision on the current request (a `CallerIdentification`).
    /// - Throws: `forbidden` when the process ran another program or ended since it
    ///   connected; the connection is closed after the answer.
    func identify(needsCgroup: Bool) throws(BrokerError) -> Caller? {
        if changed { throw Self.changedError }
        guard writersChecked else {
            // Rules came in by a reload after this connection opened, or its writers cannot
            // be checked: what it sent may come from any process holding the socket.
            changed = true
            throw read ? Self.uncheckedError : Self.openedBeforeRulesError
        }
        if let unidentified { throw unidentified }
        guard var known = caller, let start = startTime else { return nil }
        let pid = known.pid
        // The same process: with a pidfd, it still runs (a pid reused since is another
        // process, and the pidfd would show the first one ended); without, the same start
        // time. Running the same file: exec keeps pid and start time but changes the file.
        let alive = pidfd >= 0 ? PeerCredentials.isAlive(pidfd) : PeerCredentials.startTime(of: pid) == start
        let now = inspector.view(of: pid, namespaces: false)
        // A helper that stopped answering says nothing about the process: say that instead.
        if now.failure == ProcessInspector.helperGone { throw Self.unidentifiedError(now.failure) }
        guard alive, let exe = now.executableID, exe.isSameInode(as: known.executableID) else {
            changed = true
            caller = nil
            throw Self.changedError
        }
        // Read now, as the rule's file is on every decision: a stamp that is a ctime moves
        // with a chmod or a new hard link.
        if exe != known.executableID {
            known.executableID = exe
            caller = known
        }
        if needsCgroup, known.cgroup == nil {
            known.cgroup = PeerCredentials.cgroup(of: pid)
            caller = known
        }
        return known
    }

    /// The refusal of a caller whose executable the daemon could not read: no rule can
    /// match it, and "add a rule" would not help, so it says why and what to change.
    static func unidentifiedError(_ failure: Int32?) -> BrokerError {
        let why: String
        switch failure {
        case ProcessInspector.helperGone:
            why = "its identification helper (authbroker-id) does not answer: restart the daemon (systemctl --user restart authbroker.service)"
        case EACCES, EPERM:
            why = "the kernel does not let it read the program's /proc/PID/exe, because authbrokerd runs in a user namespace or sandbox of its own (PrivateUsers= or another sandboxing option in a drop-in of authbroker.service): remove that drop-in (docs/systemd.md, \"Hardening\")"
        case ENOENT, ESRCH:
            why = "the program ended before it could be identified: connect again"
        default:
            let text = failure.map { String(cString: strerror($0)) } ?? "unknown error"
            why = "reading the program's /proc/PID/exe failed (\(text))"
        }
        return .forbidden(message: "forbidden by policy: authbrokerd cannot identify the program that asks, so no [[allow]] rule can match it: \(why)")
    }

    static let openedBeforeRulesError = BrokerError.forbidden(
        message: "forbidden by policy: this connection was opened before the [[allow]] rules came into force, so the daemon does not know which process writes on it; the connection is closed: connect again")

    static let uncheckedError = BrokerError.forbidden(
        message: "forbidden by policy: the daemon cannot tell which process writes on this connection; the connection is closed: the daemon's log says why (journalctl --user -u authbroker)")

    static let changedError = BrokerError.forbidden(
        message: "forbidden by policy: the process that opened this connection has since ended or run another program; the connection is closed: connect again from the program that asks")
}
