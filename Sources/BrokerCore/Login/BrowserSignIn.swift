import BrokerCrypto
import BrokerProtocol
import Logging
import OAuth

/// The browser sign-in: authorization code + PKCE (S256) with a loopback redirect
/// (RFC 8252 §7.3), `state` and `nonce`, and the RFC 9207 `iss` check.
///
/// Owns no state beyond the sign-ins it adds to `LoginSessions` (the sign-in service's);
/// opens its loopback listener through `RedirectListening` (the server's).
final class BrowserSignIn: Sendable {
    private let logins: LoginSessions
    private let completion: SignInCompletion
    private let providers: ProvidersService
    /// Opens the browser sign-in's loopback listener; without one only device sign-ins work.
    private let redirects: (any RedirectListening)?
    private let counters: BrokerCounters
    private let logger: Logger
    private let clock: WallClock
    /// Starts one sign-in per provider at a time, so that they replace each other in turn.
    private let turns = ProviderTurns()

    init(logins: LoginSessions, completion: SignInCompletion, providers: ProvidersService, redirects: (any RedirectListening)?,
         counters: BrokerCounters, logger: Logger, clock: WallClock) {
        self.logins = logins
        self.completion = completion
        self.providers = providers
        self.redirects = redirects
        self.counters = counters
        self.logger = logger
        self.clock = clock
    }


    func start(_ provider: Provider, _ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        var extra = provider.config.authorizationParams.merging(params.params ?? [:]) { $1 }
        if let prompt = Self.offlineAccessPrompt(provider.config, asked: extra) { extra["prompt"] = prompt }
        let reserved = AuthorizationRequest.reserved(in: extra.keys)
        guard reserved.isEmpty else {
            throw BrokerError.invalidRequest(message: "\(reserved.joined(separator: ", ")) cannot be given: authbroker sets it itself")
        }
        let timeout = params.timeout ?? providers.config.daemon.loginTimeout
        guard (1...3600).contains(timeout) else {
            throw BrokerError.invalidRequest(message: "timeout must be between 1 and 3600 seconds")
        }
        let metadata = try await provider.discovered()
        guard let endpoint = metadata.authorizationEndpoint else {
            throw BrokerError.loginFailed(provider: provider.name, message: "\(provider.name) has no authorization endpoint: sign in with `authctl login --device`")
        }
        guard let redirects else {
            throw BrokerError.invalidRequest(message: "this daemon cannot receive a browser sign-in's redirect: sign in with `authctl login --device`")
        }
        return try await turns.inTurn(provider.name) { () async throws(BrokerError) -> LoginStartResult in
            try await startInTurn(provider, params, metadata: metadata, endpoint: endpoint, redirects: redirects, extra: extra, timeout: timeout)
        }
    }

    /// `prompt=consent` for a sign-in that asks for `offline_access` (OpenID Connect Core
    /// §11), unless a `prompt` is set already (`authorization_params`, `--prompt`) or the
    /// provider's configuration says it needs none (`consent_for_offline_access = false`).
    static func offlineAccessPrompt(_ config: ProviderConfig, asked extra: [String: String]) -> String? {
        guard extra["prompt"] == nil, config.consentForOfflineAccess, config.scopes.contains("offline_access") else { return nil }
        return "consent"
    }

    /// Replaces the provider's sign-in in progress, opens the listener and adds the new sign-in.
    private func startInTurn(_ provider: Provider, _ params: LoginStartParams, metadata: ProviderMetadata, endpoint: String,
                             redirects: any RedirectListening, extra: [String: String], timeout: Int) async throws(BrokerError) -> LoginStartResult {
        await logins.replace(provider: provider.name)
        let state = SecureRandom.token()
        let listener = try await redirects.listen(
            port: UInt16(provider.config.redirectPort ?? 0), screen: .expecting(state: state, provider: provider.name))
        let request = AuthorizationRequest(
            clientID: provider.config.clientID, redirectURI: "http://127.0.0.1:\(listener.port)/callback", scopes: provider.config.scopes,
            state: state, nonce: SecureRandom.token(), pkce: PKCE(),
            resources: params.resource.map { [$0] } ?? provider.config.resources, audienceParameter: provider.config.audienceParameter,
            extra: extra.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        // Deadlines count on CLOCK_BOOTTIME (`WallClock`); the wire gets the wall clock's.
        let started = clock.reading()
        let deadline = started.boot + Double(timeout)
        let id = SecureRandom.token(bytes: 16)
        let task = Task<AccountInfo, any Error> {
            let outcome: Result<AccountInfo, BrokerError>
            do throws(BrokerError) {
                outcome = .success(try await self.awaitRedirect(listener, request, metadata: metadata, provider: provider, resource: params.resource, deadline: deadline))
            } catch {
                outcome = .failure(error)
            }
            await listener.close()
            return try outcome.get()
        }
        let session = LoginSession(id: id, provider: provider.name, expiresAt: deadline, task: task)
        let shown = LoginStartResult(
            loginID: id, provider: provider.name, flow: .browser,
            authorizationURL: request.url(endpoint: endpoint), expiresAt: Int64(deadline + started.offset))
        session.shown = shown
        do {
            try logins.add(session, now: started.boot)
        } catch {
            task.cancel()
            await listener.close()
            throw error
        }
        logger.info("browser sign-in started", metadata: ["provider": "\(provider.name)", "login_id": "\(id)", "port": "\(listener.port)"])
        return shown
    }

    /// Waits for the redirect (until the deadline, or until the sign-in is cancelled), then
    /// finishes the sign-in and answers the browser with a page saying how it went.
    private func awaitRedirect(_ listener: any RedirectListener, _ request: AuthorizationRequest, metadata: ProviderMetadata,
                               provider: Provider, resource: String?, deadline: Double) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        let clock = self.clock
        let (arrived, unanswered) = await withTaskGroup(of: BrowserRedirect?.self) { group in
            group.addTask { await listener.redirect() }
            group.addTask {
                try? await Task.sleep(for: .seconds(max(0, deadline - clock.boottime())))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // The deadline (or a cancellation) came first, but a redirect that arrived in the
            // same instant is handed over as the wait ends: it must still be answered.
            var late: [BrowserRedirect] = []
            if first == nil {
                for await redirect in group { if let redirect { late.append(redirect) } }
            }
            return (first, late)
        }
        guard let redirect = arrived else {
            let error = Task.isCancelled ? BrokerError.signInCancelled(name) : BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) timed out before the browser came back: run `authctl login --provider \(name)` again. If you did sign in, \(name) may have shown an error page instead of sending the browser back here (a provider that matches redirect URIs exactly refuses the loopback one's port: set redirect_port under [providers.\(name)] in config.toml and register that URI at the provider, docs/providers.md)")
            for redirect in unanswered { redirect.answer(.failed(provider: name, reason: error.message)) }
            throw error
        }
        do {
            let account = try await finishBrowserLogin(redirect.query, request, metadata: metadata, provider: provider, resource: resource)
            redirect.answer(.signedIn(provider: name, account: account.shownName))
            return account
        } catch {
            redirect.answer(.failed(provider: name, reason: error.message))
            logger.warning("browser sign-in refused", metadata: ["provider": "\(name)", "reason": "\(error.message)"])
            throw error
        }
    }

    /// Checks the redirect (state, iss, error), redeems the code and stores the account.
    private func finishBrowserLogin(_ query: [String: String], _ request: AuthorizationRequest, metadata: ProviderMetadata,
                                    provider: Provider, resource: String?) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        func refuse(_ why: String) -> BrokerError {
            .loginFailed(provider: name, message: "the sign-in to \(name) was refused: \(why); run `authctl login --provider \(name)` again")
        }
        guard let state = query["state"], constantTimeEqual(state, request.state) else {
            // The listener lets only the sign-in's own state through; this is the second look.
            throw refuse("the redirect's state does not match this sign-in (a forged or stale redirect)")
        }
        // RFC 9207: a provider that advertises `iss` must send it; any `iss` sent must match.
        // Error responses too (§2.4): an error from another issuer is not the provider's word.
        if let iss = query["iss"] {
            guard iss == provider.config.issuer else { throw refuse("the redirect's iss is not \(provider.config.issuer) (RFC 9207 mix-up protection)") }
        } else if metadata.authorizationResponseIssParameterSupported == true {
            throw refuse("the redirect has no iss, which \(name) promises to send (RFC 9207)")
        }
        if let error = query["error"] {
            let prompt = request.extra.last { $0.0 == "prompt" }?.1
            throw .loginFailed(provider: name, message: ProviderRefusal.message(
                provider: name, error: error, description: query["error_description"], prompt: prompt,
                configuredPrompt: provider.config.authorizationParams["prompt"]))
        }
        guard let code = query["code"], !code.isEmpty else { throw refuse("the redirect carries no authorization code") }
        // A new sign-in gets a new DPoP key; the tokens it redeems are bound to it.
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let tokens: TokenResponse
        let client = provider.client(signer, metadata: metadata, clock: clock)
        do {
            // Not cut off when the sign-in is cancelled (replaced, Ctrl-C): the provider may
            // have issued the tokens already, and only its answer lets them be revoked.
            let redeemed = await Task { () async -> Result<TokenResponse, OAuthError> in
                do throws(OAuthError) {
                    return .success(try await client.exchangeCode(
                        metadata, code: code, redirectURI: request.redirectURI, codeVerifier: request.pkce.verifier, resource: nil))
                } catch {
                    return .failure(error)
                }
            }.value
            tokens = try redeemed.get()
        } catch {
            counters.providerErrors.increment()
            switch error {
            case .provider(let oauthCode, _, _):
                throw refuse("the provider would not redeem the authorization code (\(oauthCode))")
            default:
                throw await provider.failedSignIn(error)
            }
        }
        if Task.isCancelled {
            let issued = IssuedTokens(accessTokens: [tokens.accessToken], refreshToken: tokens.refreshToken)
            let revocation = await completion.revokeRefused(issued, provider: provider, metadata: metadata)
            throw BrokerError.signInCancelled(name).appending(revocation)
        }
        return try await completion.completeLogin(tokens, provider: provider, metadata: metadata, nonce: request.nonce, dpop: signer,
                                                  resource: resource, demand: AuthenticationDemand(parameters: request.extra))
    }
}

/// Compares secrets without an early exit that would leak their common prefix's length.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<x.count { diff |= x[i] ^ y[i] }
    return diff == 0
}
