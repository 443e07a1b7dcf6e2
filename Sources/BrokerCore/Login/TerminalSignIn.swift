import BrokerCrypto
import BrokerProtocol
import Logging
import OAuth

/// The terminal sign-in (`authctl login --terminal`): the daemon drives the protocol and
/// asks its questions through `login.wait`; `login.answer` brings the user's answers.
/// Answers are used for the one request they are for and kept nowhere. Through the
/// provider's authorization challenge endpoint (OAuth 2.0 for First-Party Applications
/// draft) when it has one, else the resource owner password grant.
///
/// Owns no state beyond the sign-ins it adds to `LoginSessions` (the sign-in service's).
final class TerminalSignIn: Sendable {
    private let logins: LoginSessions
    private let completion: SignInCompletion
    private let providers: ProvidersService
    private let counters: BrokerCounters
    private let logger: Logger
    private let clock: WallClock

    init(logins: LoginSessions, completion: SignInCompletion, providers: ProvidersService, counters: BrokerCounters,
         logger: Logger, clock: WallClock) {
        self.logins = logins
        self.completion = completion
        self.providers = providers
        self.counters = counters
        self.logger = logger
        self.clock = clock
    }


    func start(_ provider: Provider, _ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        let timeout = params.timeout ?? providers.config.daemon.loginTimeout
        guard (1...3600).contains(timeout) else {
            throw BrokerError.invalidRequest(message: "timeout must be between 1 and 3600 seconds")
        }
        let metadata = try await provider.discovered()
        // The first-party apps draft when the provider offers it, else the password grant.
        let challenge = metadata.authorizationChallengeEndpoint != nil
        guard challenge || provider.config.passwordGrant else {
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) offers no sign-in in the terminal: set authorization_challenge_endpoint, or password_grant = true if it allows the password grant, under [providers.\(provider.name)] in config.toml (docs/sign-in.md), or sign in with `authctl login --device`")
        }
        // As every `authctl login`: the user gave up on the one in progress, which may wait
        // at a question nobody will answer (Ctrl-C there leaves no `login.wait` to cancel it).
        await logins.replace(provider: provider.name)
        // Deadlines count on CLOCK_BOOTTIME (`WallClock`); the wire gets the wall clock's.
        let started = clock.reading()
        let deadline = started.boot + Double(timeout)
        let id = SecureRandom.token(bytes: 16)
        let conversation = Conversation()
        let resource = params.resource
        let task = Task<AccountInfo, any Error> {
            defer { conversation.finish() }
            if challenge {
                return try await self.challengeSignIn(provider, metadata: metadata, conversation: conversation, resource: resource)
            }
            return try await self.passwordSignIn(provider, metadata: metadata, conversation: conversation, resource: resource)
        }
        let session = LoginSession(id: id, provider: provider.name, expiresAt: deadline, task: task, conversation: conversation)
        let shown = LoginStartResult(loginID: id, provider: provider.name, flow: .terminal, expiresAt: Int64(deadline + started.offset))
        // What a program that joins the sign-in gets (login.start with join): without it,
        // the join would start a browser sign-in in its place.
        session.shown = shown
        do {
            try logins.add(session, now: started.boot)
        } catch {
            task.cancel()
            throw error
        }
        Task {
            try? await Task.sleep(for: .seconds(timeout))
            session.cancel(because: "the sign-in to \(provider.name) was not finished within \(timeout) s: run `authctl login --terminal --provider \(provider.name)` again")
        }
        logger.info("terminal sign-in started", metadata: ["provider": "\(provider.name)", "login_id": "\(id)"])
        return shown
    }

    /// Asks, or ends the sign-in when it was cancelled while the question was open.
    func ask(_ conversation: Conversation, _ prompt: LoginPrompt, provider: Provider) async throws(BrokerError) -> SecretBytes {
        guard let answer = await conversation.ask(prompt) else { throw BrokerError.signInCancelled(provider.name) }
        return answer
    }

    /// The resource owner password grant (RFC 6749 §4.3): user name and password, sent once
    /// to the token endpoint.
    private func passwordSignIn(_ provider: Provider, metadata: ProviderMetadata, conversation: Conversation,
                                resource: String?) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        let username = try await ask(conversation, LoginPrompt(kind: .text, label: "User name at \(name)", name: "username"), provider: provider).text
        let password = try await ask(conversation, LoginPrompt(kind: .secret, label: "Password", name: "password"), provider: provider)
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let client = provider.client(signer, metadata: metadata, clock: clock)
        let tokens: TokenResponse
        do {
            tokens = try await client.password(
                metadata, username: username, password: password, scopes: provider.config.scopes,
                resources: resource.map { [$0] } ?? provider.config.resources)
        } catch {
            counters.providerErrors.increment()
            switch error {
            case .provider("invalid_grant", _, _), .provider("unauthorized_client", _, _), .provider("access_denied", _, _):
                // Glewlwyd answers a wrong password with a bare 403, and a client without the
                // grant with a bare 400: the two cannot be told apart, so the sentence names both.
                throw BrokerError.loginFailed(provider: name, message: "\(name) refused the sign-in: the user name or password is wrong, or client \(provider.config.clientID) may not use the password grant there; check both and run `authctl login --terminal --provider \(name)` again")
            case .provider("unsupported_grant_type", _, _):
                throw BrokerError.configuration(provider: name, message: "\(name) does not offer the password grant: set password_grant = false under [providers.\(name)] in config.toml and sign in with `authctl login --device`")
            default:
                throw await provider.failedSignIn(error)
            }
        }
        logger.info("password grant answered", metadata: ["provider": "\(name)"])
        return try await completion.completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
    }


    /// The most questions one sign-in may ask; a provider asking more is stuck in a loop.
    static let challengeRounds = 10

    func challengeSignIn(_ provider: Provider, metadata: ProviderMetadata, conversation: Conversation,
                         resource: String?) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        let pkce = PKCE()
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let client = provider.client(signer, metadata: metadata, clock: clock)
        var authSession: String?
        var wanted = "username"
        var message: String?
        for _ in 0..<Self.challengeRounds {
            let prompt = try challengePrompt(wanted, message: message, provider: name)
            // The draft's answers go out as form pairs of Strings: not wiped (docs/security.md).
            let value = try await ask(conversation, prompt, provider: provider).text
            let result: AuthorizationChallengeResult
            do {
                result = try await client.authorizationChallenge(
                    metadata, authSession: authSession, pkce: pkce, scopes: provider.config.scopes,
                    resources: resource.map { [$0] } ?? provider.config.resources, answer: (wanted, value))
            } catch {
                counters.providerErrors.increment()
                throw await challengeFailure(error, asked: prompt, provider: provider)
            }
            switch result {
            case .needs(let session, let next, let text):
                authSession = session ?? authSession
                // Without a hint, the draft's own example: user name, then password.
                wanted = next ?? (wanted == "username" ? "password" : wanted)
                message = text
            case .code(let code):
                logger.info("authorization challenge answered with a code", metadata: ["provider": "\(name)"])
                let tokens: TokenResponse
                do {
                    tokens = try await client.exchangeCode(metadata, code: code, redirectURI: nil,
                                                           codeVerifier: pkce.verifier, resource: nil)
                } catch {
                    counters.providerErrors.increment()
                    if case .provider(let oauthCode, _, _) = error {
                        throw BrokerError.loginFailed(provider: name, message: "\(name) would not redeem the authorization code of the sign-in (\(oauthCode)): run `authctl login --terminal --provider \(name)` again")
                    }
                    throw await provider.failedSignIn(error)
                }
                return try await completion.completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
            }
        }
        throw BrokerError.loginFailed(provider: name, message: "\(name) asked more than \(Self.challengeRounds) questions without finishing the sign-in: sign in with the browser (`authctl login --provider \(name)`)")
    }

    /// The question for what the provider wants: `username`, `password` or `otp`.
    private func challengePrompt(_ wanted: String, message: String?, provider name: String) throws(BrokerError) -> LoginPrompt {
        let label = message.flatMap { $0.isEmpty ? nil : $0 }
        switch wanted {
        case "username": return LoginPrompt(kind: .text, label: label ?? "User name at \(name)", name: wanted)
        case "password": return LoginPrompt(kind: .secret, label: label ?? "Password", name: wanted)
        case "otp": return LoginPrompt(kind: .otp, label: label ?? "One-time code", name: wanted)
        default:
            throw BrokerError.loginFailed(provider: name, message: "\(name) asks for \(wanted), which `authctl login --terminal` cannot ask: sign in with the browser (`authctl login --provider \(name)`)")
        }
    }

    /// One sentence for an error of the authorization challenge endpoint.
    private func challengeFailure(_ error: OAuthError, asked prompt: LoginPrompt, provider: Provider) async -> BrokerError {
        let name = provider.name
        let again = "run `authctl login --terminal --provider \(name)` again"
        let what = prompt.name == "otp" ? "the code" : prompt.name == "password" ? "the password" : "the user name"
        switch error {
        case .provider("access_denied", _, _), .provider("invalid_grant", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) refused the sign-in after \(what) was given: check it and \(again)")
        case .provider("invalid_session", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) no longer knows this sign-in (invalid_session): \(again)")
        case .provider("redirect_to_web", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) wants this sign-in finished in a browser: use `authctl login --provider \(name)`")
        default:
            return await provider.failedSignIn(error)
        }
    }
}
