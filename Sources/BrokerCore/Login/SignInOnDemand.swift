import BrokerProtocol
import Logging
import Synchronization

/// Sign-in on demand (docs/sign-in.md): a caller that would rather wait than hear
/// `login_required` attaches to the provider's one pending browser sign-in, which the
/// first such caller starts and the daemon announces with a desktop notification. Every
/// later caller joins it: one sign-in, one browser tab, one notification.
///
/// Owns: the sign-ins on demand being started. Depends on the browser sign-in and the
/// sign-ins in progress (`LoginSessions`, the sign-in service's).
final class SignInOnDemand: SignInWaiting, Sendable {
    private let logins: LoginSessions
    private let browser: BrowserSignIn
    private let providers: ProvidersService
    /// Shows the user that a sign-in started on demand waits for them (a desktop
    /// notification); without one, only the waiting callers can show its URL.
    private let announcer: (any SignInAnnouncing)?
    /// Sign-ins on demand being started, by provider: concurrent callers share one.
    private let starting = Mutex<[String: Task<LoginStartResult, any Error>]>([:])
    private let logger: Logger
    private let clock: WallClock

    init(logins: LoginSessions, browser: BrowserSignIn, providers: ProvidersService, announcer: (any SignInAnnouncing)?,
         logger: Logger, clock: WallClock) {
        self.logins = logins
        self.browser = browser
        self.providers = providers
        self.announcer = announcer
        self.logger = logger
        self.clock = clock
    }


    /// `login.start` with `join`: the provider's sign-in in progress, or a new browser
    /// sign-in, announced. Concurrent callers share one start.
    func joinSignIn(_ provider: Provider, _ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        guard (params.flow ?? .browser) == .browser else {
            throw BrokerError.invalidRequest(message: "join works with the browser flow only: leave flow out, or start a \(params.flow?.rawValue ?? "") sign-in without join")
        }
        let name = provider.name
        let (task, mine) = starting.withLock { all -> (Task<LoginStartResult, any Error>, Bool) in
            if let running = all[name] { return (running, false) }
            let task = Task<LoginStartResult, any Error> {
                if let pending = self.logins.pending(provider: name), var shown = pending.shown {
                    shown.joined = true
                    return shown
                }
                return try await self.startAnnounced(provider, params)
            }
            all[name] = task
            return (task, true)
        }
        let outcome = await task.result
        starting.withLock { all in if all[name] == task { all[name] = nil } }
        switch outcome {
        case .success(var shown):
            if !mine { shown.joined = true }
            return shown
        case .failure(let error as BrokerError): throw error
        case .failure: throw BrokerError.internalError("the sign-in could not be started")
        }
    }

    /// Starts a browser sign-in and announces it; the announcement goes when it ends.
    private func startAnnounced(_ provider: Provider, _ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        let name = provider.name
        if let pause = logins.abandonments.pause(provider: name, now: clock.boottime()) {
            logger.notice("sign-in on demand paused: programs abandoned the last ones", metadata: ["provider": "\(name)", "seconds_left": "\(Int(pause.rounded(.up)))"])
            throw BrokerError.loginRequired(provider: name, message: "not signed in to \(name), and sign-ins on demand are paused for \(Int(pause.rounded(.up))) s because programs abandoned the last ones: run `authctl login --provider \(name)`")
        }
        var shown = try await browser.start(provider, LoginStartParams(
            provider: provider.name, flow: .browser, params: params.params, timeout: params.timeout, resource: params.resource))
        shown.joined = false
        shown.notified = false
        guard let session = logins.find(id: shown.loginID, provider: nil) else { return shown }
        session.markOnDemand()
        if providers.config.daemon.signInNotifications, let announcer, let url = shown.authorizationURL,
           let announcement = await announcer.announce(PendingSignIn(provider: provider.name, url: url, expiresAt: Double(shown.expiresAt),
                                                                  program: Requester.program)) {
            shown.notified = true
            Task {
                _ = await session.task.result
                await announcement.withdraw()
            }
        }
        session.shown = shown
        logger.info("sign-in on demand started", metadata: [
            "provider": "\(provider.name)", "login_id": "\(shown.loginID)", "notified": "\(shown.notified == true)",
        ])
        return shown
    }

    /// Waits up to `seconds` for the provider's pending sign-in (started or joined here)
    /// to finish. A newer sign-in that replaces it (`authctl login`) is followed; a time-out,
    /// or the caller going away, leaves it (the last waiter to leave cancels it).
    func awaitSignIn(provider name: String, seconds: Int) async throws(BrokerError) {
        let provider = try providers.provider(name)
        guard provider.config.grant == .user else { throw BrokerError.notSignedIn(name) }
        let start = try await joinSignIn(provider, LoginStartParams(provider: name, join: true))
        let deadline = clock.boottime() + Double(seconds)
        var id = start.loginID
        while true {
            guard let session = logins.find(id: id, provider: nil) else { throw BrokerError.notSignedIn(name) }
            switch await outcome(of: session, until: deadline) {
            case .success?:
                return
            case .failure(let error)?:
                if session.wasReplaced, let newer = await successor(of: id, provider: name, until: deadline) {
                    id = newer.id
                    continue
                }
                throw error
            case nil:
                if Task.isCancelled { throw BrokerError.signInCancelled(name) }
                throw BrokerError.loginRequired(provider: name, message: "the sign-in to \(name) did not finish within \(seconds) seconds: finish it in the browser, or run `authctl login --provider \(name)`")
            }
        }
    }

    /// The sign-in that replaced `id`: a new `login.start` cancels the old sign-in first and
    /// adds its own once its listener is bound, so it may take a moment to appear (at most
    /// `successorPatience` seconds, and never past the caller's deadline).
    private func successor(of id: String, provider name: String, until deadline: Double) async -> LoginSession? {
        let giveUp = min(deadline, clock.boottime() + Self.successorPatience)
        while !Task.isCancelled {
            if let newer = logins.pending(provider: name), newer.id != id { return newer }
            guard clock.boottime() < giveUp else { return nil }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    static let successorPatience: Double = 30

    /// The sign-in's outcome, or nil when the deadline came first or the caller went away.
    private func outcome(of session: LoginSession, until deadline: Double) async -> Result<AccountInfo, BrokerError>? {
        session.attachWaiter()
        let first = FirstOf<Result<AccountInfo, BrokerError>?>()
        let clock = self.clock
        let sleeper = Task {
            try? await Task.sleep(for: .seconds(max(0, deadline - clock.boottime())))
            first.offer(nil)
        }
        Task {
            let result = await session.task.result
            switch result {
            case .success(let account): first.offer(.success(account))
            case .failure(let error as BrokerError) where error == .signInCancelled(session.provider):
                first.offer(.failure(session.cancelledBecause.map { .loginFailed(provider: session.provider, message: $0) } ?? error))
            case .failure(let error as BrokerError): first.offer(.failure(error))
            case .failure: first.offer(.failure(.internalError("the sign-in failed unexpectedly")))
            }
        }
        let outcome = await withTaskCancellationHandler {
            await first.value()
        } onCancel: {
            first.offer(nil)
        }
        sleeper.cancel()
        if outcome == nil { session.joinedWaiterLeft() } else { session.waiterDone() }
        return outcome
    }
}

/// The first of several values offered from any thread; later offers are dropped.
private final class FirstOf<T: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<T, Never>)
        case done(T)
    }

    private let state = Mutex<State>(.empty)

    func offer(_ value: T) {
        let waiter = state.withLock { s -> CheckedContinuation<T, Never>? in
            switch s {
            case .empty:
                s = .done(value)
                return nil
            case .waiting(let continuation):
                s = .done(value)
                return continuation
            case .done:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }

    func value() async -> T {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s -> T? in
                if case .done(let value) = s { return value }
                s = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
