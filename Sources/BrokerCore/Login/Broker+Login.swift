import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import OAuth
import SecretStore

extension Broker {
    /// Starts a sign-in and returns what the user must open or type. The daemon polls the
    /// provider in the background; `waitLogin` waits for the outcome.
    public func startLogin(_ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        let provider = try provider(params.provider)
        guard provider.config.grant == .user else {
            throw BrokerError.invalidRequest(message: "\(provider.name) is a machine account (client credentials): it needs no sign-in")
        }
        if let resource = params.resource, !provider.config.resources.contains(resource) {
            throw BrokerError.invalidRequest(message: "\(resource) is not among the resources of \(provider.name): add it to resources in config.toml first")
        }
        if let failure = storeFailure {
            // The sign-in would end with a refresh token that cannot be kept.
            throw BrokerError.storeUnavailable(
                message: "cannot sign in to \(provider.name) now: the secret store that keeps sign-ins cannot be used (\(failure.message))",
                reason: failure.reason)
        }
        if params.join == true { return try await joinSignIn(provider, params) }
        switch params.flow ?? .browser {
        case .device: return try await startDeviceLogin(provider, resource: params.resource)
        case .browser: return try await startBrowserLogin(provider, params)
        case .terminal: return try await startTerminalLogin(provider, params)
        case .unknown:
            // The wire's reading refuses these already; this is for callers in Swift.
            throw BrokerError.invalidRequest(message: "flow must be \(LoginFlow.choices)")
        }
    }

    private func startDeviceLogin(_ provider: Provider, resource: String?) async throws(BrokerError) -> LoginStartResult {
        let metadata = try await provider.discovered()
        guard metadata.deviceAuthorizationEndpoint != nil else {
            // Not the provider's refusal: its discovery names no such endpoint (some serve
            // one anyway), and config.toml does not name one either.
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) names no device authorization endpoint in its discovery document: set device_authorization_endpoint under [providers.\(provider.name)] in config.toml to the URL its documentation gives, or sign in with the browser (`authctl login` without --device)")
        }
        await logins.replace(provider: provider.name)
        let started = clock.now()
        let authorization: DeviceAuthorization
        do {
            authorization = try await provider.client.startDeviceAuthorization(
                metadata, scopes: provider.config.scopes, resources: resource.map { [$0] } ?? provider.config.resources)
        } catch {
            counters.providerErrors.increment()
            throw await provider.failed(error, doing: "device sign-in")
        }
        let id = SecureRandom.token(bytes: 16)
        let expiresAt = started + Double(authorization.expiresIn)
        // A new sign-in gets a new DPoP key; the tokens it redeems are bound to it.
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let task = Task<AccountInfo, any Error> {
            try await self.pollDevice(authorization, metadata: metadata, provider: provider, dpop: signer, resource: resource, deadline: expiresAt)
        }
        let session = LoginSession(id: id, provider: provider.name, expiresAt: expiresAt, task: task)
        let shown = LoginStartResult(
            loginID: id, provider: provider.name, flow: .device,
            verificationURI: authorization.verificationURI,
            verificationURIComplete: authorization.verificationURIComplete,
            userCode: authorization.userCode, expiresAt: Int64(expiresAt))
        session.shown = shown
        try logins.add(session, now: started)
        logger.info("device sign-in started", metadata: ["provider": "\(provider.name)", "login_id": "\(id)"])
        return shown
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

    /// RFC 8628 §3.4–3.5: poll at the interval, slow down when told, stop at expiry or refusal.
    private func pollDevice(_ authorization: DeviceAuthorization, metadata: ProviderMetadata, provider: Provider,
                            dpop signer: DPoPSigner?, resource: String?, deadline: Double) async throws(BrokerError) -> AccountInfo {
        let client = provider.client(signer, metadata: metadata, clock: clock)
        var interval = max(1, authorization.interval)
        let name = provider.name
        // Why the last poll failed, if it did: a code that runs out while the provider is
        // failing was perhaps approved, and the user should hear that it was the provider.
        var failing: String?
        while true {
            do {
                try await Task.sleep(for: .seconds(interval))
            } catch {
                throw BrokerError.signInCancelled(name)
            }
            if clock.now() >= deadline {
                if let failing {
                    throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) was abandoned because the provider failed until its code expired (\(failing)): run `authctl login --provider \(name)` again")
                }
                throw BrokerError.loginFailed(provider: name, message: "the code for \(name) expired before it was approved: run `authctl login --provider \(name)` again")
            }
            let answer: DevicePollResult
            do {
                answer = try await client.pollDeviceToken(metadata, deviceCode: authorization.deviceCode)
            } catch {
                switch error {
                case .provider(let code, _, _) where code == "access_denied":
                    throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) was refused at the provider")
                case .provider(let code, _, _) where code == "expired_token":
                    throw BrokerError.loginFailed(provider: name, message: "the code for \(name) expired before it was approved: run `authctl login --provider \(name)` again")
                case .provider:
                    counters.providerErrors.increment()
                    throw BrokerError.loginFailed(provider: name, message: "the sign-in to \(name) failed: \(error.message)")
                case .unreachable, .invalidResponse, .configuration, .endpointNotFound:
                    // A provider that blinks during a sign-in is asked again at the next interval.
                    counters.providerErrors.increment()
                    logger.warning("device poll failed; polling on", metadata: ["provider": "\(name)", "error": "\(error.message)"])
                    failing = error.message
                    continue
                }
            }
            failing = nil
            switch answer {
            case .pending: continue
            case .slowDown: interval += 5
            case .tokens(let tokens):
                return try await completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
            }
        }
    }

    /// Turns a token response from a sign-in into a stored, ready account. A sign-in for
    /// one `resource` of a `refresh_tokens = "one-per-resource"` provider adds that
    /// resource's refresh token to the account instead (docs/providers.md).
    func completeLogin(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata, nonce: String?,
                       dpop signer: DPoPSigner?, resource: String? = nil) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        var issued = IssuedTokens(accessTokens: [tokens.accessToken], refreshToken: tokens.refreshToken)
        let identity: SignInIdentity
        do {
            identity = try await identify(tokens, provider: provider, metadata: metadata, nonce: nonce, dpop: signer, issued: &issued)
        } catch {
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            throw error.appending(revocation)
        }
        guard let refreshToken = identity.refreshToken ?? tokens.refreshToken else {
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            throw BrokerError.loginFailed(provider: name, message: "\(name) issued no refresh token: add \"offline_access\" to its scopes in config.toml, or allow refresh tokens for client \(provider.config.clientID); a provider that grants offline access only after consent (OpenID Connect Core §11) needs authorization_params = { prompt = \"consent\" } for [providers.\(name)] and the browser sign-in (docs/providers.md); \(revocation)")
        }
        var account = Account(
            key: AccountKey(provider: name, subject: identity.subject),
            issuer: provider.config.issuer, clientID: provider.config.clientID,
            username: identity.username, refreshToken: refreshToken, idToken: identity.idToken, state: .ready)
        account.dpop = signer
        if provider.config.refreshTokens == .onePerResource, let known = accounts[account.key], known.state == .ready {
            // The other resources' sign-ins stay valid; one for `resource` adds to them.
            account.resourceRefreshTokens = known.resourceRefreshTokens
            if let resource {
                account.resourceRefreshTokens[resource] = refreshToken
                account.refreshToken = known.refreshToken
                account.rotatedFor = known.rotatedFor
            }
        }
        do {
            try await store.save(AccountSecret.credential(for: account))
        } catch {
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            throw BrokerError.storeUnavailable(message: "signed in to \(name), but the refresh token could not be stored (\(error.message)); \(revocation)", reason: error.reason)
        }
        cache.removeAll(for: account.key)
        accounts.put(account)
        logger.info("signed in", metadata: ["account": "\(account.key)"])
        events.emit(BrokerEvent(kind: .signedIn, provider: name, account: account.displayName, subject: account.key.subject))
        return account.info
    }
}

extension Broker {
    /// Verifies an ID token (signature by the provider's key, iss, aud, azp, exp, iat, nonce).
    func verifyIDToken(_ idToken: String, provider: Provider, metadata: ProviderMetadata, nonce: String?) async throws(BrokerError) -> IDTokenClaims {
        do {
            return try await idTokens.verify(idToken, metadata: metadata, clientID: provider.config.clientID, nonce: nonce,
                                             now: Date(timeIntervalSince1970: clock.now()), skew: 120)
        } catch {
            logger.warning("ID token refused", metadata: ["provider": "\(provider.name)", "reason": "\(error.reason.rawValue)"])
            throw BrokerError.loginFailed(provider: provider.name, message: "\(provider.name) returned an ID token that was refused: \(error.message)")
        }
    }
}
