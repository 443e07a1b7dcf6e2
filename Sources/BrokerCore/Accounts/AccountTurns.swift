import Logging
import Synchronization

/// Each account's turn: its `RefreshQueue`, which every refresh of the account and every
/// write of its newest refresh token to the store take in order (so an older write can
/// never land last, and no refresh sends a refresh token another one spent). Owned by the
/// accounts service; the refresher takes its turns through `AccountsService.turn(of:)`.
final class AccountTurns: Sendable {
    private let queues = Mutex<[AccountKey: RefreshQueue]>([:])
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// The account's queue: every refresh of the account runs in it.
    func queue(for key: AccountKey) -> RefreshQueue {
        queues.withLock { all in
            if let q = all[key] { return q }
            let q = RefreshQueue()
            all[key] = q
            return q
        }
    }

    /// Every account's queue made so far.
    var all: [AccountKey: RefreshQueue] { queues.withLock { $0 } }

    /// Gives the account's refresh in flight `Refresher.lateAnswerAtStop` to end, then
    /// cancels it (the daemon stops, or the account signs out).
    func settle(_ queue: RefreshQueue, of key: AccountKey, stopping: Bool) async {
        let until = ContinuousClock.now + .seconds(Refresher.lateAnswerAtStop)
        while await queue.isBusy, ContinuousClock.now < until {
            try? await Task.sleep(for: .milliseconds(50))
        }
        guard await queue.cancelAll() else { return }
        guard stopping else {
            logger.notice("signing out before \(key.provider) answered a refresh of this account: the refresh was cut off", metadata: ["account": "\(key)"])
            return
        }
        logger.error("stopping before \(key.provider) answered a refresh of this account, which it may have taken: if it did, and it rotates refresh tokens, the stored one no longer works and the next start needs `authctl login --provider \(key.provider)`", metadata: ["account": "\(key)"])
    }
}
