import Logging
import Synchronization

/// Logs refused connections at most once per `interval`, with how many were refused in
/// between: another user's process, or any process past `max_connections`, may connect in
/// a loop, and one line each would flood the journal.
final class RefusalLog: Sendable {
    private let interval: UInt64
    /// When the last line was written (monotonic ns; 0: never), and the refusals since.
    private let state = Mutex<(last: UInt64, suppressed: Int)>((0, 0))

    init(intervalSeconds: UInt64 = 10) {
        self.interval = intervalSeconds * 1_000_000_000
    }

    func refused(uid: String, pid: String, logger: Logger) {
        refused("refused a connection from another user", ["uid": "\(uid)", "pid": "\(pid)"], logger: logger)
    }

    /// Logs `message` with `metadata` and the count of refusals since the last line, unless
    /// a line went out less than `interval` ago.
    func refused(_ message: Logger.Message, _ metadata: Logger.Metadata, logger: Logger) {
        let now = ServerActivity.monotonicNanoseconds()
        let suppressed: Int? = state.withLock { s in
            guard s.last == 0 || now - s.last >= interval else {
                s.suppressed += 1
                return nil
            }
            defer { s = (now, 0) }
            return s.suppressed
        }
        guard let suppressed else { return }
        logger.warning(message, metadata: metadata.merging(["refused_since_last_line": "\(suppressed)"]) { $1 })
    }
}
