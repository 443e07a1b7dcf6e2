import BrokerProtocol
import Logging
import Synchronization

/// The sign-ins of the daemon: those running, capped per provider so a local program
/// cannot make the daemon poll a provider without end, and the last ones that finished,
/// kept a while for a late `login.wait`. Finished, cancelled and replaced sign-ins never
/// count against the cap: abandoning sign-ins cannot lock anyone out of a new one.
final class LoginSessions: Sendable {
    /// Sign-ins running at once per provider. A new `authctl login` replaces the running
    /// one, so more than one runs only while several programs start sign-ins at once.
    static let runningPerProvider = 4
    /// Finished sign-ins kept for a late `login.wait`, the newest first to stay.
    static let keptFinished = 32
    /// How long a finished sign-in stays for a late `login.wait` after its expiry.
    static let keepAfterExpiry: Double = 300

    private struct State {
        var sessions: [String: LoginSession] = [:]
        /// The ids of finished sign-ins still kept, oldest first.
        var finished: [String] = []
    }

    private let state = Mutex(State())
    /// Sign-ins whose task has not finished, for the daemon's idle exit.
    private let running = Atomic<Int>(0)
    /// Sign-ins on demand that programs abandoned, per provider.
    let abandonments = AbandonedSignIns()
    private let clock: WallClock
    private let logger: Logger

    init(clock: WallClock = .system, logger: Logger = Logger(label: "authbroker.login")) {
        self.clock = clock
        self.logger = logger
    }

    func add(_ session: LoginSession, now: Double) throws(BrokerError) {
        try state.withLock { (s: inout State) throws(BrokerError) in
            s.finished.removeAll { id in
                guard let old = s.sessions[id], old.expiresAt + Self.keepAfterExpiry <= now else { return false }
                s.sessions[id] = nil
                return true
            }
            let provider = session.provider
            let busy = s.sessions.values.lazy.filter { $0.provider == provider && $0.isRunning }.count
            guard busy < Self.runningPerProvider else {
                throw BrokerError.overloaded(message: "\(busy) sign-ins to \(provider) are already waiting for the user: finish one, or run `authctl login --provider \(provider)` to replace them")
            }
            s.sessions[session.id] = session
        }
        running.wrappingAdd(1, ordering: .relaxed)
        Task {
            _ = await session.task.result
            session.markOver()
            // Counted as running until its bookkeeping is done: no sign-in is in neither count.
            self.finished(session)
            self.running.wrappingSubtract(1, ordering: .relaxed)
        }
    }

    /// Moves a sign-in whose task ended to the finished ones, dropping the oldest beyond
    /// `keptFinished`, and tells the pace of sign-ins on demand how it ended.
    private func finished(_ session: LoginSession) {
        state.withLock { s in
            guard s.sessions[session.id] != nil else { return }
            s.finished.append(session.id)
            while s.finished.count > Self.keptFinished {
                s.sessions[s.finished.removeFirst()] = nil
            }
        }
        if session.isOnDemand && session.wasAbandoned {
            let inARow = abandonments.abandoned(provider: session.provider, now: clock.boottime())
            logger.info("sign-in on demand abandoned by the program that asked", metadata: [
                "provider": "\(session.provider)", "login_id": "\(session.id)", "in_a_row": "\(inARow)",
            ])
        } else if session.cancelledBecause == nil {
            abandonments.finished(provider: session.provider)
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
        state.withLock { s in
            s.sessions.values.filter { $0.provider == provider && $0.isRunning }
                .max { $0.expiresAt < $1.expiresAt }
        }
    }

    /// Cancels the sign-ins `matching` picks and waits until they are over.
    func cancel(where matching: (LoginSession) -> Bool, because reason: String) async {
        let chosen = state.withLock { s in s.sessions.values.filter(matching) }
        for session in chosen { session.cancel(because: reason) }
        for session in chosen { _ = await session.task.result }
    }

    /// Sign-ins still waiting for the user or the provider.
    var inProgress: Int { running.load(ordering: .relaxed) }

    func find(id: String?, provider: String?) -> LoginSession? {
        state.withLock { s in
            if let id { return s.sessions[id] }
            return s.sessions.values.filter { provider == nil || $0.provider == provider }.max { $0.expiresAt < $1.expiresAt }
        }
    }
}

extension BrokerError {
    /// A sign-in's task was cancelled: replaced, or its waiter went away.
    static func signInCancelled(_ provider: String) -> BrokerError {
        .loginFailed(provider: provider, message: "the sign-in to \(provider) was cancelled: run `authctl login --provider \(provider)` again")
    }
}
