import BrokerProtocol
import OAuth
import SecretStore

extension Broker {
    /// The answer from the cache, without waiting: nil when the token must be refreshed
    /// (or the request fails), in which case the caller goes on to `token(_:)`.
    public func cachedToken(_ request: TokenGetParams) -> TokenGetResult? {
        counters.tokenRequests.increment()
        // Runs on the event loop for every request: short locks, no sorted copies, no
        // thrown errors. Anything unusual returns nil and `token(_:)` answers it, an
        // out-of-range min_ttl included (it is refused there, cached or not).
        if let minTTL = request.minTTL, !TokenGetParams.minTTLRange.contains(minTTL) { return nil }
        guard case .found(let provider, let account) = resolve(provider: request.provider, account: request.account),
              provider.config.serves(resource: request.resource),
              provider.config.allows(scopes: request.scopes ?? []),
              request.params.map({ provider.config.allows(paramNames: $0.keys) }) ?? true,
              account.state == .ready
        else { return nil }
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], params: request.params)
        let margin = table.withLock { $0.config.daemon.refreshMargin }
        let minimumLife = Double(max(margin, request.minTTL ?? 0))
        guard let token = cache.lookup(key, now: clock.now(), minimumLife: minimumLife) else { return nil }
        counters.cacheHits.increment()
        askedFor(key, provider: provider)
        return result(token, key: key, account: account)
    }

    /// A token for the request: from the cache when it has enough life left, otherwise
    /// refreshed first (one refresh per account at a time). With `wait_for_sign_in`, an
    /// account that needs a sign-in gets one first (`awaitSignIn`, docs/sign-in.md).
    public func token(_ request: TokenGetParams) async throws(BrokerError) -> TokenGetResult {
        guard let wait = request.waitForSignIn else { return try await tokenNow(request) }
        let range = TokenGetParams.waitForSignInRange
        guard range.contains(wait) else {
            throw BrokerError.invalidRequest(message: "wait_for_sign_in must be between \(range.lowerBound) and \(range.upperBound) seconds")
        }
        do {
            return try await tokenNow(request)
        } catch {
            guard case .loginRequired(let name, _) = error else { throw error }
            try await awaitSignIn(provider: name, seconds: wait)
            return try await tokenNow(request)
        }
    }

    /// `token(_:)` without waiting for a sign-in: `login_required` at once.
    private func tokenNow(_ request: TokenGetParams) async throws(BrokerError) -> TokenGetResult {
        try Self.checkMinTTL(request.minTTL)
        try Self.checkParams(request.params)
        let (provider, account) = try resolved(provider: request.provider, account: request.account)
        guard account.state == .ready else {
            throw BrokerError.signInAgain(provider.name, account.displayName)
        }
        // Every new resource costs a request to the provider: only configured ones are asked
        // for, so a caller cannot make the daemon send thousands.
        guard provider.config.serves(resource: request.resource) else {
            throw BrokerError.invalidRequest(message: "resource is not one of the resources of [providers.\(provider.name)] in config.toml: add it there (and sign in again), or set any_resource = true there")
        }
        try checkCallerChoices(scopes: request.scopes, params: request.params, provider: provider)
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], params: request.params)
        // After the answer is in the cache: the background refresh starts from it.
        defer { askedFor(key, provider: provider) }
        let minimumLife = minimumLife(request.minTTL)
        if let token = cache.lookup(key, now: clock.now(), minimumLife: minimumLife) {
            counters.cacheHits.increment()
            return result(token, key: key, account: account)
        }
        let token: CachedToken
        do {
            token = try await queue(for: account.key).run(key) { () async throws(BrokerError) -> CachedToken in
                // Another request may have filled the cache while this one waited its turn.
                if let token = self.cache.lookup(key, now: self.clock.now(), minimumLife: minimumLife) { return token }
                try self.checkRoom(for: key, provider: provider, account: account)
                return try await self.servableRefresh(key, provider: provider)
            }
        } catch {
            // refresh_margin is the broker's own preference: while the provider cannot be
            // reached, a token that still meets the caller's min_ttl is better than none.
            guard case .providerUnreachable = error,
                  let stale = cache.lookup(key, now: clock.now(), minimumLife: Double(request.minTTL ?? 0))
            else { throw error }
            if provider.outage.servedFromCache() {
                logger.notice("\(provider.name) cannot be reached: serving cached tokens while they last (one line when it answers again)")
            }
            return result(stale, key: key, account: account)
        }
        try Self.checkLife(token, minTTL: request.minTTL, now: clock.now(), provider: provider.name)
        return result(token, key: key, account: account)
    }

    /// Refuses a token just minted that cannot be served: shorter-lived than the caller's
    /// `min_ttl`, or than the cache's reserve second.
    static func checkLife(_ token: CachedToken, minTTL: Int?, now: Double, provider: String) throws(BrokerError) {
        let left = token.expiresAt - now
        if let minTTL, left <= Double(minTTL) {
            throw BrokerError.invalidRequest(message: "\(provider) issues tokens for this resource that live less than the min_ttl of \(minTTL) s asked for")
        }
        if left <= TokenCache.reserve {
            throw BrokerError.invalidRequest(message: "\(provider) issued a token for this resource that lives less than a second, which authbroker never serves (it could expire on the way to the API): check the access token lifetime at the provider")
        }
    }

    /// Refuses a `min_ttl` outside the one range `token.get` and `token.exchange` take.
    static func checkMinTTL(_ minTTL: Int?) throws(BrokerError) {
        let range = TokenGetParams.minTTLRange
        if let minTTL, !range.contains(minTTL) {
            throw BrokerError.invalidRequest(message: "min_ttl must be between \(range.lowerBound) and \(range.upperBound) seconds")
        }
    }

    /// The life a cached token must have left to be served: the caller's `min_ttl`, and no
    /// less than `refresh_margin`.
    func minimumLife(_ minTTL: Int?) -> Double {
        Double(max(config.daemon.refreshMargin, minTTL ?? 0))
    }

    func result(_ token: CachedToken, key: CacheKey, account: Account) -> TokenGetResult {
        TokenGetResult(
            accessToken: token.accessToken, tokenType: token.tokenType, expiresAt: Int64(token.expiresAt),
            scope: token.scope, resource: key.resource, provider: key.account.provider,
            account: account.displayName)
    }

    /// A refresh whose token has life left to serve: a provider that answered so late (it
    /// stalled, or was overloaded) that the token, counted from when the request was sent,
    /// is already spent is asked once more. Its tokens normally live longer than it took.
    func servableRefresh(_ key: CacheKey, provider: Provider) async throws(BrokerError) -> CachedToken {
        let token = try await refresh(key, provider: provider)
        guard token.expiresAt - clock.now() <= TokenCache.reserve else { return token }
        logger.notice("\(provider.name) answered a refresh too late for its token to be served; refreshing once more")
        return try await refresh(key, provider: provider)
    }

    /// One refresh at the provider. Runs inside the account's RefreshQueue, so it always
    /// uses the newest refresh token and never overlaps another refresh of the account.
    func refresh(_ key: CacheKey, provider: Provider) async throws(BrokerError) -> CachedToken {
        guard var account = accounts[key.account] else { throw BrokerError.notSignedIn(provider.name) }
        guard account.state == .ready else {
            throw BrokerError.signInAgain(provider.name, account.displayName)
        }
        let metadata = try await provider.discovered()
        try await provider.checkBackoff()
        let chain = account.chain(for: key.resource, rule: provider.config.refreshTokens)
        let refreshToken = account.refreshToken(of: chain)
        // A provider that keeps one live access token per refresh token revokes the chain's
        // earlier tokens as it takes this refresh: none is served from here on. (One handed
        // out just before this line may still die; that is the caller's `token.reject`.)
        var revoked: CachedToken?
        if provider.config.accessTokens == .onePerRefreshToken && !account.machine {
            revoked = cache.removeChain(chain, of: account.key, returning: key)
        }
        if provider.config.dpop != nil { try provider.checkOffersDPoP(metadata) }
        let sentAt = clock.now()
        let response: TokenResponse
        account = try await withDPoPKey(account, provider: provider, metadata: metadata)
        let client = provider.client(provider.signer(of: account), metadata: metadata, clock: clock)
        // The provider's own parameters first; a caller's of the same name wins.
        let extra = provider.config.tokenParams.merging(key.params) { $1 }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        do {
            let scopes = key.scopes.isEmpty ? nil : key.scopes
            if account.machine {
                // A machine account has no grant to fall back on: ask for the configured scopes.
                response = try await client.clientCredentials(
                    metadata, resource: key.resource, scopes: scopes ?? provider.config.scopes, extra: extra)
            } else {
                response = try await refreshRequest(
                    client, metadata: metadata, refreshToken: refreshToken, resource: key.resource, scopes: scopes,
                    extra: extra, sentAt: sentAt, provider: provider, account: account)
            }
        } catch {
            counters.providerErrors.increment()
            let refused = account.machine ? error.isInvalidGrant : error.refusesRefreshToken
            if refused, let chain {
                throw await dropChain(chain, of: account, provider: provider)
            }
            if refused {
                accounts.update(account.key) { $0.state = .loginRequired }
                cache.removeAll(for: account.key)
                // Remembered in the item, so `account.list` says so after a restart too.
                if let marked = accounts[account.key] { try? await store.save(AccountSecret.credential(for: marked)) }
                logger.warning("refresh token refused: sign-in required", metadata: ["account": "\(account.key)"])
                events.emit(BrokerEvent(kind: .loginRequired, provider: provider.name, account: account.displayName,
                                        subject: account.key.subject))
                throw BrokerError.signInAgain(provider.name, account.displayName)
            }
            if case .provider("invalid_target", _, _) = error {
                throw invalidTarget(key.resource, account: account, chain: chain, provider: provider)
            }
            var failure = await provider.failed(error, doing: "token refresh")
            if case .provider("invalid_request", _, _) = error, !account.machine {
                // Some providers say invalid_request for a refresh token they no longer have
                // without naming it: the next step, should the refusal stand.
                failure = failure.appending("if \(provider.name) refuses again, sign in again: run `authctl login --provider \(provider.name)`")
            }
            // The provider was not reached (or did not answer): this key's token is kept for
            // the caller that can still use it while the provider is down.
            if case .providerUnreachable = failure, let revoked { cache.restore(revoked, at: key) }
            logger.warning("refresh failed", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
            throw failure
        }
        await provider.succeeded()
        if let served = provider.outage.end() {
            logger.notice("\(provider.name) answers again; \(served == 1 ? "1 request was" : "\(served) requests were") served from the cache while it could not be reached")
        }
        counters.refreshes.increment()
        // An ID token that comes with a refresh is checked like any other (OIDC Core §12.2);
        // one that fails is not kept, and the access token is still served.
        var idToken: String?
        if let received = response.idToken {
            if let claims = try? await verifyIDToken(received, provider: provider, metadata: metadata, nonce: nil),
               claims.sub == account.key.subject {
                idToken = received
            }
        }
        if !account.machine, let rotated = response.refreshToken, rotated != refreshToken {
            await persistRotation(rotated, idToken: idToken, of: account, chain: chain, resource: key.resource)
        }
        if provider.signer(of: account) != nil, response.tokenType != "DPoP" {
            // After the rotated refresh token is kept: the refresh itself worked.
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) issued a \(response.tokenType) token although dpop is set for it in config.toml, so the token is not bound to the daemon's key: enable DPoP for client \(provider.config.clientID) at the provider, or set dpop = false for \(provider.name)")
        }
        let token = CachedToken(
            accessToken: response.accessToken, tokenType: response.tokenType,
            expiresAt: CachedToken.expiry(sentAt: sentAt, expiresIn: response.expiresIn), scope: response.scope, chain: chain)
        cache.store(token, for: key, now: clock.now())
        events.emit(BrokerEvent(kind: .tokenRefreshed, provider: key.account.provider, account: account.displayName,
                                subject: key.account.subject, resource: key.resource, scopes: key.scopes,
                                expiresAt: Int64(token.expiresAt)))
        logger.debug("refreshed", metadata: ["account": "\(account.key)", "resource": "\(key.resource ?? "-")", "expires_in": "\(response.expiresIn ?? 300)", "expires_at": "\(Int64(token.expiresAt))"])
        return token
    }

    /// One refresh request, under `refresh_timeout`. When it gets no answer and the
    /// provider has a reuse grace period that is not over yet, it is sent once more with the
    /// same refresh token: the provider may have taken the first one and rotated the
    /// refresh token, and the answer to the retry carries the newest one.
    private func refreshRequest(_ client: OAuthClient, metadata: ProviderMetadata, refreshToken: String, resource: String?,
                             scopes: [String]?, extra: [(String, String)], sentAt: Double, provider: Provider,
                             account: Account) async throws(OAuthError) -> TokenResponse {
        let timeout = Double(config.daemon.refreshTimeout)
        do {
            return try await client.refresh(metadata, refreshToken: refreshToken, resource: resource, scopes: scopes,
                                            extra: extra, timeout: timeout)
        } catch {
            let grace = Double(provider.config.refreshTokenReuseGrace)
            guard error.isNoAnswer, grace > 0, clock.now() - sentAt < grace - 1 else { throw error }
            logger.notice("no answer to a refresh; sending it once more with the same refresh token, inside \(provider.name)'s reuse grace period", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            return try await client.refresh(metadata, refreshToken: refreshToken, resource: resource, scopes: scopes,
                                            extra: extra, timeout: timeout)
        }
    }

    /// The rotated refresh token goes into memory at once (so it is never lost) and into the
    /// store before the access token it came with is served.
    private func persistRotation(_ refreshToken: String, idToken: String?, of account: Account,
                                 chain: String?, resource: String?) async {
        var updated = account
        if let chain {
            updated.resourceRefreshTokens[chain] = refreshToken
        } else {
            updated.refreshToken = refreshToken
            updated.rotatedFor = resource ?? ""
        }
        if let idToken { updated.idToken = idToken }
        updated.unsaved = true
        accounts.put(updated)
        do {
            try await store.save(AccountSecret.credential(for: updated))
            accounts.update(account.key) { $0.unsaved = false }
        } catch {
            // The new refresh token stays in memory and is written again until the store
            // takes it; the caller still gets the token the provider issued.
            logger.error("the rotated refresh token could not be written to the store; retrying in the background", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            retrySave(account.key)
        }
    }

    /// Writes an account whose newest refresh token is only in memory until the store takes
    /// it (every 5 s), in turn with the account's refreshes. One retry loop per account.
    func retrySave(_ key: AccountKey) {
        guard resaving.withLock({ $0.insert(key).inserted }) else { return }
        Task {
            defer { _ = resaving.withLock { $0.remove(key) } }
            while true {
                try? await Task.sleep(for: .seconds(5))
                let done = await queue(for: key).exclusive { () async -> Bool in
                    guard let current = self.accounts[key], current.unsaved else { return true }
                    guard (try? await self.store.save(AccountSecret.credential(for: current))) != nil else { return false }
                    self.accounts.update(key) { $0.unsaved = false }
                    self.logger.notice("the newest refresh token is stored now", metadata: ["account": "\(key)"])
                    return true
                }
                if done { return }
            }
        }
    }
}
