import BrokerProtocol
import Synchronization

/// A sign-in in progress: started by `login.start`, finished by the provider, awaited by
/// `login.wait` (any number of times, until it is purged).
final class LoginSession: Sendable {
    let id: String
    let provider: String
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
        if last { cancel(because: "the sign-in to \(provider) was cancelled: the program waiting for it went away") }
    }

    /// A waiter got its answer.
    func waiterDone() {
        waiters.withLock { $0.now -= 1 }
    }
}

/// The sign-ins in progress, capped so a local program cannot make the daemon poll a
/// provider without end.
final class LoginSessions: Sendable {
    static let limit = 16
    /// How long a finished sign-in stays for a late `login.wait`.
    static let keepAfterExpiry: Double = 300
    private let sessions = Mutex<[String: LoginSession]>([:])
    /// Sign-ins whose task has not finished, for the daemon's idle exit.
    private let running = Atomic<Int>(0)

    func add(_ session: LoginSession, now: Double) throws(BrokerError) {
        try sessions.withLock { (all: inout [String: LoginSession]) throws(BrokerError) in
            all = all.filter { $0.value.expiresAt + Self.keepAfterExpiry > now }
            guard all.count < Self.limit else {
                throw BrokerError.overloaded(message: "\(Self.limit) sign-ins are already in progress: finish or abandon one first")
            }
            all[session.id] = session
        }
        running.wrappingAdd(1, ordering: .relaxed)
        Task {
            _ = await session.task.result
            session.markOver()
            self.running.wrappingSubtract(1, ordering: .relaxed)
        }
    }

    /// Cancels the provider's sign-ins still in progress and waits until they are over
    /// (their ports free), so that a new sign-in can take the same fixed `redirect_port`.
    /// Called once a new sign-in's request has been checked: a new `authctl login` means
    /// the user gave up on the previous one (a closed tab, a terminal left behind).
    func replace(provider: String) async {
        await cancel(where: { $0.provider == provider }, because: Self.replacedReason(provider))
    }

    static func replacedReason(_ provider: String) -> String {
        "a newer sign-in to \(provider) replaced this one: finish that one instead"
    }

    /// The provider's newest sign-in that is still waiting for the user, if any.
    func pending(provider: String) -> LoginSession? {
        sessions.withLock { all in
            all.values.filter { $0.provider == provider && !$0.isOver && $0.cancelledBecause == nil }
                .max { $0.expiresAt < $1.expiresAt }
        }
    }

    /// Cancels the sign-ins `matching` picks and waits until they are over.
    func cancel(where matching: (LoginSession) -> Bool, because reason: String) async {
        let chosen = sessions.withLock { all in all.values.filter(matching) }
        for session in chosen { session.cancel(because: reason) }
        for session in chosen { _ = await session.task.result }
    }

    /// Sign-ins still waiting for the user or the provider.
    var inProgress: Int { running.load(ordering: .relaxed) }

    func find(id: String?, provider: String?) -> LoginSession? {
        sessions.withLock { all in
            if let id { return all[id] }
            return all.values.filter { provider == nil || $0.provider == provider }.max { $0.expiresAt < $1.expiresAt }
        }
    }
}

extension BrokerError {
    /// A sign-in's task was cancelled: replaced, or its waiter went away.
    static func signInCancelled(_ provider: String) -> BrokerError {
        .loginFailed(provider: provider, message: "the sign-in to \(provider) was cancelled: run `authctl login --provider \(provider)` again")
    }
}

extension Broker {
    /// Sign-ins still waiting for the user or the provider: a daemon with one is not idle.
    public var signInsInProgress: Int { logins.inProgress }

    /// Cancels every sign-in in progress and returns once their listeners are closed: the
    /// daemon is stopping, and the event loops they are served on go next.
    public func endSignIns() async {
        await logins.cancel(where: { _ in true }, because: "authbrokerd stopped during the sign-in: run `authctl login` again once it runs")
    }
}
