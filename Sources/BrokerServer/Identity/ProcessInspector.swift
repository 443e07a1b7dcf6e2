#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import CLinux
import Logging
import Synchronization

/// Reads what a caller runs: the file behind `/proc/PID/exe` and the process's mount and
/// user namespaces, which the kernel shows only to a process that may ptrace-read it.
///
/// Unconfined, the daemon reads them itself (`direct`). Confined by Landlock (`Sandbox` in
/// authbrokerd), it may not: a Landlock domain cannot ptrace-access any process outside it.
/// It then asks the identification helper it forked before confining itself (`start()`),
/// which opens the three files and hands their descriptors back over a socketpair; the
/// daemon stats and reads them through `/proc/self/fd`, so the policy compares the same
/// file either way (docs/security.md, "Confinement").
public final class ProcessInspector: Sendable {
    /// What one look at a process found.
    public struct View: Sendable {
        /// The executable's file, or nil when it could not be opened (see `failure`).
        public var executableID: FileID?
        /// Its path as the kernel reports it (for messages).
        public var executable: String?
        /// The mount and user namespaces, when asked for and readable.
        public var namespaces: [FileID]?
        /// Why the executable could not be read: an errno of the open of `/proc/PID/exe`,
        /// or `Self.helperGone` when the helper did not answer.
        public var failure: Int32?
    }

    /// The helper did not answer (it was killed or stopped): not an errno.
    public static let helperGone: Int32 = -1

    /// Reads `/proc` directly: for a daemon that is not confined (and for tests).
    public static let direct = ProcessInspector(helper: nil)

    /// The daemon's end of the socketpair, -1 for `direct`.
    private let helper: CInt
    /// The last question's serial number; held for the whole round trip (one at a time).
    private let serial = Mutex<UInt32>(0)
    /// The helper's pid, for the log.
    public let helperPID: pid_t?
    /// Whether the helper's silence was logged already: once is enough, callers hear it each time.
    private let silenceLogged = Atomic<Bool>(false)

    /// Logs, the first time only, that the helper no longer answers.
    func logSilence(_ logger: Logger) {
        guard !silenceLogged.exchange(true, ordering: .relaxed) else { return }
        logger.error("the identification helper (authbroker-id) does not answer: every [[allow]] rule refuses its callers until the daemon restarts (systemctl --user restart authbroker.service)",
                     metadata: ["helper_pid": "\(helperPID ?? 0)"])
    }

    private init(helper: (fd: CInt, pid: pid_t)?) {
        self.helper = helper?.fd ?? -1
        self.helperPID = helper?.pid
    }

    /// Forks the identification helper. Call before the daemon confines itself, while it
    /// has one thread. Returns nil (errno set) when it cannot be forked.
    public static func start() -> ProcessInspector? {
        // Read before confinement: the user's namespaces come from the parent process
        // (systemd --user), which a confined daemon may not look at any more.
        _ = PeerCredentials.userNamespaces
        var pid: pid_t = 0
        let fd = clinux_inspector_start(&pid)
        guard fd >= 0 else { return nil }
        return ProcessInspector(helper: (fd: fd, pid: pid))
    }

    /// The program `pid` runs, as the user is shown it (a notification); its name only
    /// when /proc could not be read.
    public func program(of pid: Int32) -> RequestingProgram {
        let view = view(of: pid, namespaces: false)
        return RequestingProgram(executable: view.executable, pid: pid,
                                 forwarded: view.executableID.map(Forwarders.identify) ?? false)
    }

    /// Whether a helper answers the questions (the daemon is confined).
    public var usesHelper: Bool { helper >= 0 }

    /// Looks at process `pid`: its executable and, with `namespaces`, its namespaces. A few
    /// microseconds directly; one round trip to the helper otherwise (docs/performance.md).
    public func view(of pid: Int32, namespaces: Bool) -> View {
        guard helper >= 0 else {
            let exe = FileID(path: "/proc/\(pid)/exe")
            let failure = exe == nil ? errno : nil
            return View(executableID: exe, executable: exe == nil ? nil : PeerCredentials.link("/proc/\(pid)/exe"),
                        namespaces: namespaces ? PeerCredentials.namespaces(of: String(pid)) : nil, failure: failure)
        }
        var fds: (CInt, CInt, CInt) = (-1, -1, -1)
        var errors: (CInt, CInt, CInt) = (0, 0, 0)
        let helper = self.helper
        let answered = serial.withLock { serial -> Bool in
            serial &+= 1
            let question = serial
            return withUnsafeMutableBytes(of: &fds) { f in
                withUnsafeMutableBytes(of: &errors) { e in
                    // The helper answers in microseconds; a second means it was stopped.
                    clinux_inspector_ask(helper, question, pid, namespaces ? 1 : 0, 1000,
                                         f.baseAddress?.assumingMemoryBound(to: CInt.self),
                                         e.baseAddress?.assumingMemoryBound(to: CInt.self)) == 0
                }
            }
        }
        guard answered else { return View(failure: Self.helperGone) }
        defer { for fd in [fds.0, fds.1, fds.2] where fd >= 0 { close(fd) } }
        var view = View()
        if fds.0 >= 0 {
            view.executableID = FileID(path: "/proc/self/fd/\(fds.0)")
            view.executable = PeerCredentials.link("/proc/self/fd/\(fds.0)")
        } else {
            view.failure = errors.0
        }
        if fds.1 >= 0, fds.2 >= 0, let mnt = FileID(path: "/proc/self/fd/\(fds.1)", stamped: false),
           let user = FileID(path: "/proc/self/fd/\(fds.2)", stamped: false) {
            view.namespaces = [mnt, user]
        }
        return view
    }
}
