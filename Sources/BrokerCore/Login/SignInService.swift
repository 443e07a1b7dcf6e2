import BrokerCrypto
import BrokerProtocol
import Logging

/// The sign-in service: `login.start`, `login.wait` and `login.answer`. Starts the flow
/// asked for (browser, device, terminal, or joining the sign-in on demand), waits for its
/// outcome, passes the user's answers to a terminal sign-in's questions.
///
/// Owns: the sign-ins in progress and the last finished ones (`LoginSessions`), which its
/// flows (`BrowserSignIn`, `DeviceSignIn`, `TerminalSignIn`, `SignInOnDemand`) add to.
/// Depends on the providers and the accounts (whether the store can keep a sign-in).
public final class SignInService: RegistersMethods, Sendable {
    private let logins: LoginSessions
    private let browser: BrowserSignIn
    private let device: DeviceSignIn
    private let terminal: TerminalSignIn
    /// The sign-in on demand, which the tokens service waits on (`SignInWaiting`).
    let onDemand: SignInOnDemand
    private let providers: ProvidersService
    private let accounts: AccountsService

    /// - Parameters:
    ///   - redirects: opens the browser sign-in's loopback listener; without one only
    ///     device and terminal sign-ins work.
    ///   - announcer: shows a sign-in on demand to the user (the desktop notification).
    init(providers: ProvidersService, accounts: AccountsService, tokens: TokenForgetting, events: EventHub,
         counters: BrokerCounters, redirects: (any RedirectListening)?, announcer: (any SignInAnnouncing)?,
         logger: Logger, clock: WallClock) {
        let logins = LoginSessions(clock: clock, logger: logger)
        let completion = SignInCompletion(providers: providers, accounts: accounts, tokens: tokens, events: events,
                                          logger: logger, clock: clock)
        let browser = BrowserSignIn(logins: logins, completion: completion, providers: providers, redirects: redirects,
                                    counters: counters, logger: logger, clock: clock)
        self.logins = logins
        self.browser = browser
        self.device = DeviceSignIn(logins: logins, completion: completion, counters: counters, logger: logger, clock: clock)
        self.terminal = TerminalSignIn(logins: logins, completion: completion, providers: providers, counters: counters,
                                       logger: logger, clock: clock)
        self.onDemand = SignInOnDemand(logins: logins, browser: browser, providers: providers, announcer: announcer,
                                       logger: logger, clock: clock)
        self.providers = providers
        self.accounts = accounts
    }

    /// Starts a sign-in and returns what the user must open or type. The daemon polls the
    /// provider in the background; `waitLogin` waits for the outcome.
    public func startLogin(_ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        let provider = try providers.provider(params.provider)
        guard provider.config.grant == .user else {
            throw BrokerError.invalidRequest(message: "\(provider.name) is a machine account (client credentials): it needs no sign-in")
        }
        if let resource = params.resource, !provider.config.resources.contains(resource) {
            throw BrokerError.invalidRequest(message: "\(resource) is not among the resources of \(provider.name): add it to resources in config.toml first")
        }
        if let failure = accounts.storeFailure {
            // The sign-in would end with a refresh token that cannot be kept.
            throw BrokerError.storeUnavailable(
                message: "cannot sign in to \(provider.name) now: the secret store that keeps sign-ins cannot be used (\(failure.message))",
                reason: failure.reason)
        }
        if params.join == true { return try await onDemand.joinSignIn(provider, params) }
        // Loaded once is not usable now (a keyring locked since): asked before the user
        // approves anything, not after, when the refresh token would have nowhere to go.
        do {
            try await accounts.writes.checkStore()
        } catch {
            throw BrokerError.storeUnavailable(
                message: "cannot sign in to \(provider.name) now: the secret store that keeps sign-ins cannot be used (\(error.message)); nothing was sent to \(provider.name)",
                reason: error.reason)
        }
        switch params.flow ?? .browser {
        case .device: return try await device.start(provider, resource: params.resource)
        case .browser: return try await browser.start(provider, params)
        case .terminal: return try await terminal.start(provider, params)
        case .unknown:
            // The wire's reading refuses these already; this is for callers in Swift.
            throw BrokerError.invalidRequest(message: "flow must be \(LoginFlow.choices)")
        }
    }


    /// Waits until the sign-in finishes and returns the account.
    public func waitLogin(_ params: LoginWaitParams) async throws(BrokerError) -> LoginWaitResult {
        guard let session = logins.find(id: params.loginID, provider: params.provider) else {
            throw BrokerError.loginFailed(provider: params.provider, message: "no sign-in in progress with that id: start one with `authctl login`")
        }
        // The server cancels this call when the waiter's connection closes (Ctrl-C on
        // `authctl login`); a sign-in nobody waits for any more is cancelled with it.
        session.attachWaiter()
        if let conversation = session.conversation {
            // A terminal sign-in's question ends this wait; the answer comes by `login.answer`.
            let prompt = await withTaskCancellationHandler {
                await conversation.nextPrompt()
            } onCancel: {
                session.waiterLeft()
            }
            // Gone already (waiterLeft ran): nobody reads the answer.
            if Task.isCancelled { throw BrokerError.signInCancelled(session.provider) }
            if let prompt {
                session.waiterDone()
                return LoginWaitResult(prompt: prompt)
            }
        }
        let result = await withTaskCancellationHandler {
            await session.task.result
        } onCancel: {
            session.waiterLeft()
        }
        if !Task.isCancelled { session.waiterDone() }
        switch result {
        case .success(let account): return LoginWaitResult(account: account)
        case .failure(let error as BrokerError) where error == .signInCancelled(session.provider):
            throw session.cancelledBecause.map { BrokerError.loginFailed(provider: session.provider, message: $0) } ?? error
        case .failure(let error as BrokerError): throw error
        case .failure: throw BrokerError.internalError("the sign-in failed unexpectedly")
        }
    }


    /// `login.answer`: the user's answer to the question the sign-in waits on. The answer
    /// comes in a `SecretBytes` (the server reads it from the request's bytes): a password
    /// typed here is wiped from memory once the request it is for is sent.
    func answerLogin(loginID: String, value: SecretBytes) throws(BrokerError) -> LoginAnswerResult {
        guard let session = logins.find(id: loginID, provider: nil), let conversation = session.conversation else {
            throw BrokerError.loginFailed(provider: nil, message: "no terminal sign-in in progress with that id: start one with `authctl login --terminal`")
        }
        guard value.count <= 4096 else {
            throw BrokerError.invalidRequest(message: "an answer may be up to 4096 bytes long")
        }
        guard conversation.answer(value) else {
            // Ended (timed out, replaced, cancelled): the user hears why, not a protocol hint.
            if let reason = session.cancelledBecause { throw BrokerError.loginFailed(provider: session.provider, message: reason) }
            throw BrokerError.invalidRequest(message: "the sign-in to \(session.provider) is not waiting for an answer: call login.wait for its question first")
        }
        return LoginAnswerResult(accepted: true)
    }


    /// Sign-ins still waiting for the user or the provider: a daemon with one is not idle.
    public var inProgress: Int { logins.inProgress }

    /// Cancels every sign-in in progress and returns once their listeners are closed: the
    /// daemon is stopping, and the event loops they are served on go next.
    public func endAll() async {
        await logins.cancel(where: { _ in true }, because: "authbrokerd stopped during the sign-in: run `authctl login` again once it runs")
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .loginStart, empty: LoginStartParams(),
            // `authctl login` (no `join`) stays open: it is the user's own management, and
            // the sign-in is the user's to finish or not.
            access: .checked("with join (a sign-in on demand put in front of the user): a token of the provider, or of the resource named; without join open, the user's own `authctl login`") { p in
                p.join == true ? .signIn(provider: p.provider, resource: p.resource) : nil
            },
            answer: .later { p throws(BrokerError) in try await self.startLogin(p) }))
        registrar.add(MethodSpec(
            .loginWait, empty: LoginWaitParams(),
            access: .open("reaches only a sign-in whose id (16 random bytes, given to whoever started it) the caller holds, or the newest sign-in of a provider, which tells only whether that sign-in ended and which account it signed in: no token or claim"),
            cancelledOnClose: { _ in true },
            answer: .later { p throws(BrokerError) in try await self.waitLogin(p) }))
        registrar.add(SecretAnswerSpec(
            .loginAnswer,
            access: .open("reaches only the terminal sign-in whose id (16 random bytes, given to whoever started it) the caller holds, and only gives it an answer; nothing is answered back but whether it was taken"),
            answer: { id, value throws(BrokerError) in try self.answerLogin(loginID: id, value: value) }))
    }
}
