#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerServer
import Synchronization

/// Notices that the daemon's executable was replaced on disk while it runs — a package
/// upgrade renames the new file over /usr/bin/authbrokerd, `scripts/install` puts a new one
/// in ~/.local/bin — so that a socket-activated daemon stops at its next quiet moment and
/// systemd starts the new executable on the next connection, rather than the old code
/// running on until the user logs out (docs/systemd.md, "Upgrades"); and that it was
/// removed (`apt-get remove`, the file deleted), so that no daemon goes on serving tokens
/// from a program that is no longer installed.
///
/// One `stat` of the path at each look of the thread that trims memory (`MemoryTrim`, every
/// 1–5 s): no wake-up of its own, and nothing per request. Not a task that sleeps on Swift's
/// concurrency pool, which would keep a pool thread alive (`MemoryTrim.start`).
final class UpgradeWatch: Sendable {
    /// The file a process runs: the path it was started from, and its device and inode.
    struct Executable: Sendable, Equatable {
        let path: String
        let device: UInt64
        let inode: UInt64

        /// This process's executable, read from /proc/self/exe at start; nil when it cannot
        /// be read, or was already replaced or removed when the daemon started.
        static func running() -> Executable? {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
            guard length > 0 else { return nil }
            let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            var running = stat()
            guard stat("/proc/self/exe", &running) == 0, let named = identity(of: path),
                  named == (UInt64(running.st_dev), UInt64(running.st_ino)) else { return nil }
            return Executable(path: path, device: UInt64(running.st_dev), inode: UInt64(running.st_ino))
        }

        /// What became of the file at the path since start: another file is there (an
        /// upgrade), nothing is (the package removed: the running file shows as "(deleted)"
        /// in /proc/self/exe), or nil while it is the running file or cannot be told (a
        /// folder on the way that cannot be searched, something that is no regular file).
        var change: Change? {
            var info = stat()
            guard stat(path, &info) == 0 else { return errno == ENOENT || errno == ENOTDIR ? .removed : nil }
            guard (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            return (UInt64(info.st_dev), UInt64(info.st_ino)) == (device, inode) ? nil : .replaced
        }

        private static func identity(of path: String) -> (UInt64, UInt64)? {
            var info = stat()
            guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
            return (UInt64(info.st_dev), UInt64(info.st_ino))
        }
    }

    enum Change: Sendable, Equatable {
        /// Another file at the path: the new version, which the next start runs.
        case replaced
        /// Nothing at the path, at two looks in a row (one installer that deletes before it
        /// copies is not taken for a removal): nothing can start the daemon again from it.
        case removed
    }

    let executable: Executable
    private let noticed = Atomic<Bool>(false)
    /// The looks in a row that found nothing at the path.
    private let goneLooks = Atomic<Int>(0)
    private let report: @Sendable (Change) -> Void

    /// Watches `executable`; `report` is called once, on the looking thread, when it was
    /// replaced or removed.
    init(_ executable: Executable, report: @escaping @Sendable (Change) -> Void) {
        self.executable = executable
        self.report = report
    }

    /// One look: a `stat` of the path until it leads to another file or to none, nothing after.
    func look() {
        guard !noticed.load(ordering: .relaxed), let change = executable.change else {
            goneLooks.store(0, ordering: .relaxed)
            return
        }
        if change == .removed, goneLooks.add(1, ordering: .relaxed).newValue < 2 { return }
        noticed.store(true, ordering: .relaxed)
        report(change)
    }

    /// How long nothing must have happened on any connection before the daemon stops, at
    /// first; it shrinks over `patience` to `leastQuiet`, so that a program asking every
    /// second (a status bar) cannot keep the old daemon running, while a caller that has
    /// just connected still gets to send its request and be answered.
    static let quietSeconds = 2.0
    static let patience = 30.0
    static let leastQuiet = 0.05

    /// Returns at the first quiet moment: no request being worked on, no sign-in in
    /// progress, and nothing on any connection for a while (`quietSeconds`, less the longer
    /// it waits). Connections left open (an idle client, an event subscription) do not hold
    /// the daemon, nor do callers with pauses between requests: the wait is bounded by
    /// `patience` and the longest request or sign-in.
    static func waitForQuiet(_ activity: ServerActivity, signIns: SignInService) async {
        let start = ContinuousClock.now
        while !Task.isCancelled {
            let waited = ContinuousClock.now - start
            let seconds = Double(waited.components.seconds) + Double(waited.components.attoseconds) / 1e18
            let quiet = max(leastQuiet, quietSeconds * (1 - seconds / patience))
            if activity.requestsInFlight == 0, signIns.inProgress == 0, activity.secondsSinceLastActivity >= quiet {
                return
            }
            do {
                try await Task.sleep(for: .milliseconds(100))
            } catch {
                return
            }
        }
    }
}
