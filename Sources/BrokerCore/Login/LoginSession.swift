import BrokerProtocol
import Synchronization

/// A sign-in in progress: started by `login.start`, finished by the provider, awaited by
/// `login.wait` (any number of times, until it is purged).
final class LoginSession: Sendable {
    let id: String
    let provider: String
    /// When it gives up, on CLOCK_BOOTTIME (`WallClock`); `shown` has it on the wall clock.
    let expiresAt: Double
    let task: Task<AccountInfo, any Error>
    /// The questions of a `terminal` sign-in; nil for the other flows.
    let conversation: Conversation?
    /// Waiters attached now, and whether one ever was.
    private let waiters = Mutex<(now: Int, ever: Bool)>((0, false))
    /// Why the sign-in was cancelled, when it was: its waiters read this instead of the
    /// task's own "cancelled".
    private let cancelReason = Mutex<String?>(nil)
    /// What `login.start` answered, for callers that join the sign-in later.
    private let shownAs = Mutex<LoginStartResult?>(nil)
    /// Whether the task is over (signed in, failed or cancelled).
    private let finished = Atomic<Bool>(false)
    /// Started on demand for a waiting program (`login.start` with `join`, `wait_for_sign_in`),
    /// not by the user's `authctl login`.
    private let startedOnDemand = Atomic<Bool>(false)
    /// Its last waiter went away before the outcome: the sign-in was abandoned.
    private let abandoned = Atomic<Bool>(false)

    init(id: String, provider: String, expiresAt: Double, task: Task<AccountInfo, any Error>,
         conversation: Conversation? = nil) {
        self.id = id
        self.provider = provider
        self.expiresAt = expiresAt
        self.task = task
        self.conversation = conversation
    }

    /// Ends the sign-in (its listener closes, its polling stops) unless it is over already.
    func cancel(because reason: String) {
        cancelReason.withLock { if $0 == nil { $0 = reason } }
        task.cancel()
    }

    var cancelledBecause: String? { cancelReason.withLock { $0 } }

    /// Whether a newer sign-in to the provider cancelled this one.
    var wasReplaced: Bool { cancelledBecause == LoginSessions.replacedReason(provider) }

    /// What the user was told to open: the answer a caller that joins the sign-in gets.
    var shown: LoginStartResult? {
        get { shownAs.withLock { $0 } }
        set { shownAs.withLock { $0 = newValue } }
    }

    var isOver: Bool { finished.load(ordering: .acquiring) }

    func markOver() { finished.store(true, ordering: .releasing) }

    /// Whether the sign-in still waits for the user or the provider: neither over nor
    /// cancelled (a cancelled one is over as soon as its listener has closed).
    var isRunning: Bool { !isOver && cancelledBecause == nil }

    var isOnDemand: Bool { startedOnDemand.load(ordering: .relaxed) }

    func markOnDemand() { startedOnDemand.store(true, ordering: .relaxed) }

    /// Whether its waiters all went away before it finished (and so cancelled it).
    var wasAbandoned: Bool { abandoned.load(ordering: .relaxed) }

    func attachWaiter() {
        waiters.withLock { $0.now += 1; $0.ever = true }
    }

    /// A waiter went away before the outcome (its connection closed). The last one to go
    /// takes the sign-in with it: nobody is left to tell, and its port should not stay
    /// open for the whole `login_timeout`.
    func waiterLeft() {
        let last = waiters.withLock { w -> Bool in
            w.now -= 1
            return w.now == 0
        }
        guard last, !isOver else { return }
        abandoned.store(true, ordering: .relaxed)
        cancel(because: "the sign-in to \(provider) was cancelled: the program waiting for it went away")
    }

    /// A program that joined the sign-in stopped waiting before the outcome (its wait ran
    /// out, or it went away): as `waiterLeft`, except that it never ends a terminal
    /// sign-in, whose user waits for nothing while typing an answer and so is not counted
    /// then; that sign-in ends on its user's Ctrl-C during a wait, its timeout, or a newer one.
    func joinedWaiterLeft() {
        guard conversation == nil else { return waiterDone() }
        waiterLeft()
    }

    /// A waiter got its answer.
    func waiterDone() {
        waiters.withLock { $0.now -= 1 }
    }
}
