import BrokerCrypto
import BrokerProtocol
import Logging
import OAuth
import SecretStore
import Synchronization

/// One refresh at the provider, and what it leaves behind: the account's `RefreshQueue`
/// (one refresh per refresh token at a time), the rotated refresh token stored before the
/// access token is served, a refused refresh token's consequences, an account's DPoP key.
/// Used by the tokens and exchange services and the background refreshes; registers no
/// method.
///
/// Owns: the refresh queues, the set of accounts whose newest refresh token is being
/// written again. Writes the token cache (owned by the tokens service) and the accounts.
final class Refresher: Sendable {
    let cache: TokenCache
    private let accounts: AccountsService
    private let providers: ProvidersService
    private let counters: BrokerCounters
    private let events: EventHub
    private let logger: Logger
    private let clock: WallClock
    private let queues = Mutex<[AccountKey: RefreshQueue]>([:])
    /// Accounts whose newest refresh token is being written again (see `retrySave`).
    private let resaving = Mutex<Set<AccountKey>>([])
    /// The refresh tokens (fingerprints, by account and chain) a provider last answered
    /// `invalid_request` without naming them: a second such answer to the same one is
    /// taken as its refusal (`refusedAgain`).
    private let invalidRequests = Mutex<[String: String]>([:])
    /// The providers whose clock skew has been logged.
    private let clockSkews = ClockSkewNotes()

    init(cache: TokenCache, accounts: AccountsService, providers: ProvidersService, counters: BrokerCounters,
         events: EventHub, logger: Logger, clock: WallClock) {
        self.cache = cache
        self.accounts = accounts
        self.providers = providers
        self.counters = counters
        self.events = events
        self.logger = logger
        self.clock = clock
    }

    private var store: any CredentialStore { accounts.store }

    /// The account's queue: every refresh of the account runs in it.
    func queue(for key: AccountKey) -> RefreshQueue {
        queues.withLock { all in
            if let q = all[key] { return q }
            let q = RefreshQueue()
            all[key] = q
            return q
        }
    }

    /// A refresh whose token has life left to serve: a provider that answered so late (it
    /// stalled, or was overloaded) that the token, counted from when the request was sent,
    /// is already spent is asked once more. Its tokens normally live longer than it took.
    func servableRefresh(_ key: CacheKey, provider: Provider) async throws(BrokerError) -> CachedToken {
        let token = try await refresh(key, provider: provider)
        guard token.life(at: clock.reading()) <= TokenCache.reserve else { return token }
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
        if account.machine && provider.config.clientSecret == nil {
            // Neither config.toml nor the Secret Service holds one: asking would only be refused.
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) uses grant = \"client_credentials\", which needs the client's secret: store it with `authctl set-secret --provider \(provider.name) < FILE`, or set client_secret under [providers.\(provider.name)] in config.toml")
        }
        let metadata = try await provider.discovered()
        try await provider.checkBackoff()
        if provider.config.dpop != nil { try provider.checkOffersDPoP(metadata) }
        // The caller pays for the request now that it will be sent, before any token is dropped.
        try ProviderRequests.charge()
        let chain = account.chain(for: key.resource, rule: provider.config.refreshTokens)
        let refreshToken = account.refreshToken(of: chain)
        // A provider that keeps one live access token per refresh token revokes the chain's
        // earlier tokens as it takes this refresh: none is served from here on. (One handed
        // out just before this line may still die; that is the caller's `token.reject`.)
        var revoked: [CacheKey: CachedToken] = [:]
        if provider.config.accessTokens == .onePerRefreshToken && !account.machine {
            revoked = cache.removeChain(chain, of: account.key)
        }
        let sent = clock.reading()
        let sentAt = sent.wall
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
                    extra: extra, sent: sent, provider: provider, account: (account, chain, revoked))
            }
        } catch {
            counters.providerErrors.increment()
            let refused = account.machine ? error.isInvalidGrant
                : error.refusesRefreshToken || refusedAgain(error, refreshToken, of: account, chain: chain, asking: key)
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
                // without naming it: the next step, should the refusal stand (a second one
                // to the same refresh token is taken as its refusal: `refusedAgain`).
                failure = failure.appending("if \(provider.name) answers so again, the sign-in is taken as no longer valid: then run `authctl login --provider \(provider.name)`")
            }
            // The provider was not reached (or did not answer): it revoked nothing, so the
            // chain's tokens, this key's and the other resources', are served while it is down.
            if case .providerUnreachable = failure { cache.restore(revoked) }
            logger.warning("refresh failed", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
            throw failure
        }
        await provider.succeeded()
        invalidRequests.withLock { _ = $0.removeValue(forKey: Self.chainKey(account.key, chain)) }
        noteClockSkew(of: provider, response: response, sentAt: sentAt)
        if let served = provider.outage.end() {
            logger.notice("\(provider.name) answers again; \(served == 1 ? "1 request was" : "\(served) requests were") served from the cache while it could not be reached")
        }
        counters.refreshes.increment()
        // An ID token that comes with a refresh is checked like any other (OIDC Core §12.2);
        // one that fails is not kept, and the access token is still served.
        var idToken: String?
        if let received = response.idToken {
            if let claims = try? await providers.verifyIDToken(received, provider: provider, metadata: metadata, nonce: nil),
               claims.sub == account.key.subject {
                idToken = received
            }
        }
        if !account.machine, let rotated = response.refreshToken, rotated != refreshToken {
            await persistRotation(rotated, idToken: idToken, of: account, chain: chain, resource: key.resource)
        } else if !account.machine, let idToken {
            await keepIDToken(idToken, of: account.key)
        }
        if let unusable = response.unusable {
            // After the rotated refresh token is kept: the provider took the refresh.
            counters.providerErrors.increment()
            let failure = await provider.failed(unusable, doing: "token refresh")
            logger.warning("refresh answered with an access token that cannot be used; its refresh token was kept",
                           metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
            throw failure
        }
        if provider.signer(of: account) != nil, response.tokenType != "DPoP" {
            // After the rotated refresh token is kept: the refresh itself worked.
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) issued a \(response.tokenType) token although dpop is set for it in config.toml, so the token is not bound to the daemon's key: enable DPoP for client \(provider.config.clientID) at the provider, or set dpop = false for \(provider.name)")
        }
        let exp = CachedToken.jwtExpiry(response.accessToken)
        let received = clock.reading()
        let expiry = CachedToken.expiry(sent: sent, received: received, expiresIn: response.expiresIn, exp: exp)
        if expiry.life(at: sent) <= TokenCache.reserve {
            // Spent on issue, however fast the answer came: asking again gets the same. The
            // provider's fault, with its back-off, as for any token answer that cannot be used.
            counters.providerErrors.increment()
            let why: String
            if let exp, exp < CachedToken.expiry(sentAt: sentAt, expiresIn: response.expiresIn) {
                why = "it issued an access token whose exp, \(JWT.utc(exp)), is past by this computer's clock (\(JWT.utc(sentAt))), so resource servers would refuse it: \(provider.name)'s clock is behind this computer's or this one is ahead; correct whichever is wrong (timedatectl shows this computer's)"
            } else {
                why = "it issued an access token that lives \(response.expiresIn ?? 0) s, too short to be served (authbroker never serves a token with less than a second left): check the access token lifetime for client \(provider.config.clientID) at the provider"
            }
            let failure = await provider.failed(.invalidResponse(why), doing: "token refresh")
            logger.warning("refresh answered with an access token that lives too short to be served", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
            throw failure
        }
        // What was sent as `scope`: a machine account without scopes asked for the configured ones.
        let asked = key.scopes.isEmpty && account.machine ? provider.config.scopes : key.scopes
        let missing = CachedToken.notGranted(answered: response.scope, asked: key.scopes)
        if !missing.isEmpty {
            logger.notice("\(provider.name) granted fewer scopes than asked for: not \(missing.joined(separator: " ")); the token is served with the scope it has", metadata: ["account": "\(account.key)", "resource": "\(key.resource ?? "-")"])
        }
        let token = CachedToken(
            accessToken: response.accessToken, tokenType: response.tokenType,
            expiry: expiry, scope: CachedToken.scope(answered: response.scope, asked: asked), chain: chain)
        cache.store(token, for: key, now: received)
        events.emit(BrokerEvent(kind: .tokenRefreshed, provider: key.account.provider, account: account.displayName,
                                subject: key.account.subject, resource: key.resource, scopes: key.scopes,
                                expiresAt: Int64(expiry.expiresAt)))
        logger.debug("refreshed", metadata: ["account": "\(account.key)", "resource": "\(key.resource ?? "-")", "expires_in": "\(response.expiresIn ?? 300)", "expires_at": "\(Int64(expiry.expiresAt))"])
        return token
    }

    /// Whether `error` is the second `invalid_request` in a row to the same refresh token:
    /// some providers answer so for a session that no longer exists without naming the
    /// refresh token (LemonLDAP::NG, for one an administrator removed), and the first such
    /// answer's sentence says the next one ends the sign-in. The first is noted,
    /// the second is taken as the refresh token's refusal. Only requests that carry nothing
    /// a caller chose (no `scopes`, no `params`) count: an `invalid_request` to one of those
    /// may be about what the caller sent, and must not end the sign-in for every program.
    private func refusedAgain(_ error: OAuthError, _ refreshToken: String, of account: Account, chain: String?,
                              asking key: CacheKey) -> Bool {
        guard case .provider("invalid_request", _, _) = error, key.scopes.isEmpty, key.params.isEmpty else { return false }
        let key = Self.chainKey(account.key, chain)
        let seen = Base64URL.encode(Array(SHA256.hash(Array(refreshToken.utf8)).prefix(12)))
        return invalidRequests.withLock { all in
            if all[key] == seen {
                all[key] = nil
                return true
            }
            all[key] = seen
            return false
        }
    }

    private static func chainKey(_ account: AccountKey, _ chain: String?) -> String {
        "\(account.provider) \(account.subject) \(chain ?? "")"
    }

    /// Logs, once per provider, how far its clock is from this computer's when an answer
    /// shows more than a few seconds (`ProviderClockSkew`).
    private func noteClockSkew(of provider: Provider, response: TokenResponse, sentAt: Double) {
        guard let skew = ProviderClockSkew.measured(date: response.providerDate, accessToken: response.accessToken,
                                                    sentAt: sentAt, receivedAt: clock.now()),
              clockSkews.first(for: provider.name) else { return }
        logger.notice("\(skew.sentence(provider: provider.name))",
                      metadata: ["provider": "\(provider.name)", "clock_difference": "\(Int(skew.seconds.rounded()))"])
    }

    /// How long a refresh request written to the provider may wait for its answer, counted
    /// from the send: its caller stops waiting at `refresh_timeout` (-32004, `callerWait`),
    /// the request does not. A rotating provider that took the refresh and answers late
    /// (stalled, overloaded) has spent the refresh token the daemon holds; the answer
    /// carries the only one that works, so it is read and kept (docs/configuration.md,
    /// `refresh_timeout`). Connecting and sending stay bounded by `refresh_timeout`.
    static let lateAnswerWindow: Double = 120
    /// How long a stop waits for late answers before it cuts them off (systemd gives the
    /// whole stop 20 s, `TimeoutStopSec`).
    static let lateAnswerAtStop: Double = 5

    /// A caller's wait for a refresh of `provider`: `refresh_timeout` and a moment (so that a
    /// provider that could not be reached says so itself), then -32004 saying the answer is
    /// still awaited. Shorter than every client's own deadline (authctl's 15 s).
    func callerWait(_ provider: Provider) -> RefreshQueue.CallerWait {
        let timeout = providers.config.daemon.refreshTimeout
        let window = Int(Self.lateAnswerWindow)
        return RefreshQueue.CallerWait(
            seconds: Double(timeout) + 0.25,
            late: .providerUnreachable(provider: provider.name, retryAfter: 1, message: "\(provider.name) is slow: no answer within \(timeout) s (refresh_timeout); authbrokerd still awaits its answer (up to \(window) s) and keeps the refresh token it brings, so the sign-in is kept: try again in a few seconds"))
    }

    /// One refresh request: sent within `refresh_timeout`, its answer read for up to
    /// `lateAnswerWindow` (the caller has stopped waiting by then; the account's queue has
    /// not, so no other refresh sends the spent refresh token meanwhile). When the provider
    /// has a reuse grace period, the first request waits `refresh_timeout` only and, with
    /// no answer and the grace not over, is sent once more with the same refresh token: the
    /// provider may have taken the first one, and the answer to the retry (read as long as
    /// a late answer) carries the newest one.
    ///
    /// `revoked`, the chain's tokens dropped at the send, are put back while no answer has
    /// come by the caller's deadline (its fallback is a cached token, as when the provider
    /// cannot be reached) and dropped again when a late answer comes.
    private func refreshRequest(_ client: OAuthClient, metadata: ProviderMetadata, refreshToken: String, resource: String?,
                             scopes: [String]?, extra: [(String, String)], sent: ClockReading, provider: Provider,
                             account chained: (Account, chain: String?, revoked: [CacheKey: CachedToken])) async throws(OAuthError) -> TokenResponse {
        let (account, chain, revoked) = chained
        let timeout = Double(providers.config.daemon.refreshTimeout)
        let grace = Double(provider.config.refreshTokenReuseGrace)
        let answered = Mutex(false)
        let restore = revoked.isEmpty ? nil : Task { [cache] in
            // A little before the caller's deadline (`callerWait`), which counts from its ask.
            guard (try? await Task.sleep(for: .seconds(max(0.5, timeout - 0.5)))) != nil else { return }
            answered.withLock { if !$0 { cache.restore(revoked) } }
        }
        defer { restore?.cancel() }
        let response: TokenResponse
        do {
            response = try await client.refresh(metadata, refreshToken: refreshToken, resource: resource, scopes: scopes, extra: extra,
                                                timeout: timeout, answerTimeout: grace > 0 ? nil : Self.lateAnswerWindow,
                                                keepingRefreshToken: true)
        } catch {
            guard error.isNoAnswer, grace > 0, clock.boottime() - sent.boot < grace - 1 else { throw error }
            logger.notice("no answer to a refresh; sending it once more with the same refresh token, inside \(provider.name)'s reuse grace period", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            response = try await client.refresh(metadata, refreshToken: refreshToken, resource: resource, scopes: scopes, extra: extra,
                                                timeout: timeout, answerTimeout: Self.lateAnswerWindow, keepingRefreshToken: true)
        }
        answered.withLock { $0 = true }
        if !revoked.isEmpty { _ = cache.removeChain(chain, of: account.key) }
        let took = clock.boottime() - sent.boot
        if took > timeout {
            logger.notice("\(provider.name) answered a refresh \(Int(took)) s after it was sent, after its caller stopped waiting (refresh_timeout); what it brought is kept", metadata: ["account": "\(account.key)"])
        }
        return response
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
        guard accounts.replace(ifStill: updated) else {
            // A reload while the refresh waited removed the provider, or moved it to another
            // issuer or client: the account is not listed again. Its item (which stays) gets
            // the rotated refresh token, so the provider put back is served.
            logger.notice("a refresh answered after a reload forgot its account; the rotated refresh token is only stored", metadata: ["account": "\(account.key)"])
            do {
                try await store.save(AccountSecret.credential(for: updated))
            } catch {
                logger.error("the rotated refresh token of an account a reload forgot could not be written to the store", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            }
            return
        }
        do {
            try await store.save(AccountSecret.credential(for: updated))
            accounts.update(account.key) {
                $0.unsaved = false
                $0.unsavedBecause = nil
            }
        } catch {
            // The new refresh token stays in memory and is written again until the store
            // takes it; the caller still gets the token the provider issued.
            logger.error("the rotated refresh token could not be written to the store; retrying in the background", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            accounts.update(account.key) { $0.unsavedBecause = error }
            retrySave(account.key)
        }
    }

    /// A new ID token that came with a refresh without a rotated refresh token: kept in
    /// memory, and in the store for after a restart (best effort: the one stored before
    /// still names the same account).
    private func keepIDToken(_ idToken: String, of key: AccountKey) async {
        accounts.update(key) { $0.idToken = idToken }
        guard let updated = accounts[key], !updated.unsaved else { return }  // the retry loop writes it
        do {
            try await store.save(AccountSecret.credential(for: updated))
        } catch {
            logger.notice("the new ID token could not be written to the store; the one stored before is kept there", metadata: ["account": "\(key)", "error": "\(error.message)"])
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
                let refused = await queue(for: key).exclusive { await self.storeUnsaved(key) }
                if refused == nil { return }
            }
        }
    }

    /// Writes the account's newest refresh token when only memory holds it (the store
    /// refused it at rotation); call in turn with the account's refreshes. Nil once it is
    /// stored (or was already), else the store's refusal.
    func storeUnsaved(_ key: AccountKey) async -> StoreError? {
        guard let current = accounts[key], current.unsaved else { return nil }
        do throws(StoreError) {
            try await store.save(AccountSecret.credential(for: current))
        } catch {
            accounts.update(key) { $0.unsavedBecause = error }
            return error
        }
        accounts.update(key) {
            $0.unsaved = false
            $0.unsavedBecause = nil
        }
        logger.notice("the newest refresh token is stored now", metadata: ["account": "\(key)"])
        return nil
    }

    /// Before the daemon stops: waits for each account's refresh in flight (one reading a
    /// provider's late answer for at most `lateAnswerAtStop`, then cut off, said in the
    /// log), then writes once more every newest refresh token the store has not taken yet
    /// (the background retry ends with the process, and a restart would read the older,
    /// rotated-away one). Returns the accounts whose newest refresh token is still not stored.
    func saveUnsaved() async -> [AccountKey] {
        let all = queues.withLock { $0 }
        return await withTaskGroup(of: AccountKey?.self) { group in
            for (key, queue) in all {
                group.addTask {
                    await self.settle(queue, of: key, stopping: true)
                    guard let error = await queue.exclusive({ await self.storeUnsaved(key) }) else { return nil }
                    self.logger.error("stopping with the newest refresh token only in memory: the store did not take it, so after a restart this account may need a new sign-in", metadata: ["account": "\(key)", "error": "\(error.message)"])
                    return key
                }
            }
            var unsaved: [AccountKey] = []
            for await key in group { if let key { unsaved.append(key) } }
            return unsaved
        }
    }

    /// Gives the account's refresh in flight `lateAnswerAtStop` to end, then cancels it
    /// (the daemon stops, or the account signs out).
    func settle(_ queue: RefreshQueue, of key: AccountKey, stopping: Bool) async {
        let until = ContinuousClock.now + .seconds(Self.lateAnswerAtStop)
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

    /// The sentence for `invalid_target`: what is true about this resource and this account.
    func invalidTarget(_ resource: String?, account: Account, chain: String?, provider: Provider) -> BrokerError {
        let name = provider.name
        let what = resource ?? "the default audience"
        let message: String
        if let resource, provider.config.resources.contains(resource) {
            let perResource = "`authctl login --provider \(name) --resource \(resource)`"
            if chain == nil, let narrowed = account.rotatedFor, narrowed != resource {
                // Signing in again gives a new refresh token that narrows the same way.
                let to = narrowed.isEmpty ? "the default audience" : narrowed
                let fix = provider.config.refreshTokens == .onePerResource
                    ? "sign in once for this resource with \(perResource)"
                    : "set refresh_tokens = \"one-per-resource\" under [providers.\(name)] in config.toml, restart authbrokerd and run \(perResource) (docs/providers.md)"
                message = "\(name) narrowed this account's refresh token to \(to) when it rotated it, so it no longer grants \(resource); signing in again would narrow the new one the same way: \(fix)"
            } else if chain != nil {
                message = "\(name) no longer grants \(resource) to the sign-in made for it: run \(perResource)"
            } else {
                message = "\(name) does not grant \(resource) to this sign-in: run `authctl login --provider \(name)` so the sign-in asks for it"
            }
        } else {
            message = "\(name) does not grant tokens for \(what) to this sign-in: add it to resources in config.toml and run `authctl login --provider \(name)`"
        }
        return BrokerError.providerError(provider: name, oauthError: "invalid_target", message: message)
    }

    /// A resource's own refresh token was refused (`invalid_grant`): only that resource
    /// needs a new sign-in; the account and its other refresh tokens stay.
    func dropChain(_ chain: String, of account: Account, provider: Provider) async -> BrokerError {
        accounts.update(account.key) { $0.resourceRefreshTokens[chain] = nil }
        cache.removeAll(for: account.key)
        if let changed = accounts[account.key] { try? await store.save(AccountSecret.credential(for: changed)) }
        logger.warning("a resource's refresh token was refused: sign-in for it required",
                       metadata: ["account": "\(account.key)", "resource": "\(chain)"])
        events.emit(BrokerEvent(kind: .loginRequired, provider: provider.name, account: account.displayName,
                                subject: account.key.subject, resource: chain))
        return BrokerError.loginRequired(
            provider: provider.name,
            message: "the sign-in of \(account.displayName) at \(provider.name) for \(chain) is no longer valid: run `authctl login --provider \(provider.name) --resource \(chain)`")
    }

    /// The account with a DPoP key when its provider uses DPoP: an account signed in
    /// before DPoP was turned on gets one here, stored before its first use, because the
    /// provider may bind the next refresh token to it. Runs in the account's RefreshQueue.
    func withDPoPKey(_ account: Account, provider: Provider, metadata: ProviderMetadata) async throws(BrokerError) -> Account {
        guard provider.config.dpop != nil, account.dpop == nil else { return account }
        var updated = account
        updated.dpop = try provider.newDPoPSigner(metadata: metadata)
        accounts.update(account.key) { $0.dpop = updated.dpop }
        guard !account.machine else { return updated }  // machine accounts store nothing
        do {
            try await store.save(AccountSecret.credential(for: updated))
        } catch {
            updated.unsaved = true
            accounts.update(account.key) {
                $0.unsaved = true
                $0.unsavedBecause = error
            }
            logger.error("the new DPoP key could not be written to the store; retrying in the background", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            retrySave(account.key)
        }
        logger.info("made a DPoP key", metadata: ["account": "\(account.key)", "alg": "\(updated.dpop?.key.algorithm.rawValue ?? "-")"])
        return updated
    }

    /// Refuses a new token for `key` when the account holds `max_tokens_per_account` live
    /// tokens of other keys already and the asking program holds the most of them: every
    /// distinct resource, scope set, params and exchange target is one, and each costs a
    /// request to the provider. When another program holds more, its least recently used
    /// token makes room instead (`TokenCache.makeRoom`): one program's flood never refuses
    /// another's first token. Called in the account's queue, so concurrent requests cannot
    /// overshoot it.
    func checkRoom(for key: CacheKey, provider: Provider, account: Account) throws(BrokerError) {
        let limit = provider.config.maxTokensPerAccount
        let asker = Requester.share
        guard !cache.makeRoom(for: key, owner: asker, limit: limit, now: clock.reading()) else { return }
        logger.notice("token refused: the account holds its maximum of distinct tokens, most of them this program's", metadata: [
            "account": "\(account.key)", "limit": "\(limit)", "program": "\(asker?.description ?? "-")",
        ])
        throw BrokerError.overloaded(message: "\(account.displayName) at \(provider.name) holds \(limit) live tokens for other resources, scopes and params already, and no other program holds more of them than this one (max_tokens_per_account of [providers.\(provider.name)]): ask for one of those, or again when they expire")
    }
}
