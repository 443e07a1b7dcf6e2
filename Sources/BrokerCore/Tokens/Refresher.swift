import BrokerCrypto
import BrokerProtocol
import Logging
import OAuth
import SecretStore
import Synchronization

/// One refresh at the provider, and what it leaves behind: the rotated refresh token kept
/// (through the accounts' `AccountWrites`) before the access token is served, a refused
/// refresh token's consequences, an account's DPoP key. Runs in the account's
/// `RefreshQueue` (`AccountsService.writes.turn(of:)`: one refresh per refresh token at a
/// time, in turn with the writes of its refresh token). Used by the tokens and exchange
/// services and the background refreshes; registers no method.
///
/// Owns: the providers' `invalid_request` notes and clock-skew notes. Writes the token
/// cache (owned by the tokens service); changes the accounts through the accounts service.
final class Refresher: Sendable {
    let cache: TokenCache
    private let accounts: AccountsService
    private let providers: ProvidersService
    private let counters: BrokerCounters
    private let events: EventHub
    private let logger: Logger
    private let clock: WallClock
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

    /// The account's queue: every refresh of the account runs in it (`AccountWrites.turn`).
    func queue(for key: AccountKey) -> RefreshQueue { accounts.writes.turn(of: key) }

    /// Gives the account's refresh in flight `lateAnswerAtStop` to end, then cancels it (a
    /// sign-out needs no late answer).
    func cutOffLateAnswers(of key: AccountKey) async { await accounts.writes.cutOffLateAnswers(of: key) }

    /// A refresh whose token has life left to serve: a provider that answered so late (it
    /// stalled, or was overloaded) that the token, counted from when the request was sent,
    /// is already spent is asked once more. Its tokens normally live longer than it took.
    func servableRefresh(_ key: CacheKey, provider: Provider) async throws(BrokerError) -> CachedToken {
        let token = try await refresh(key, provider: provider)
        guard token.life(at: clock.reading()) <= TokenCache.reserve else { return token }
        logger.notice("\(provider.name) answered a refresh too late for its token to be served; refreshing once more")
        return try await refresh(key, provider: provider)
    }

    /// What one refresh sent: the account (with its DPoP key), the chain and refresh token
    /// used, the chain's tokens dropped at the send, and when it was sent.
    private struct Sent {
        var account: Account
        let chain: String?
        let refreshToken: String
        let revoked: [CacheKey: CachedToken]
        let at: ClockReading
    }

    /// One refresh at the provider. Runs inside the account's RefreshQueue, so it always
    /// uses the newest refresh token and never overlaps another refresh of the account.
    /// In order: the account can refresh; the request is sent (a refusal handled there);
    /// the rotation is kept before anything else; the answer must be usable; then the
    /// token is cached and served.
    func refresh(_ key: CacheKey, provider: Provider) async throws(BrokerError) -> CachedToken {
        let account = try refreshable(key, provider: provider)
        let metadata = try await provider.discovered()
        try await provider.checkBackoff()
        if provider.config.dpop != nil { try provider.checkOffersDPoP(metadata) }
        // The caller pays for the request now that it will be sent, before any token is dropped.
        try ProviderRequests.charge()
        let (response, sent) = try await send(key, account: account, provider: provider, metadata: metadata)
        await keepAnswer(response, sent: sent, provider: provider, metadata: metadata, resource: key.resource)
        try await checkUsable(response, of: sent.account, provider: provider)
        return try await cachedToken(response, for: key, sent: sent, provider: provider)
    }

    /// The account of `key`, when it can be refreshed: signed in, ready, and a machine
    /// account only with a client secret (neither config.toml nor the Secret Service holds
    /// one: asking would only be refused).
    private func refreshable(_ key: CacheKey, provider: Provider) throws(BrokerError) -> Account {
        guard let account = accounts[key.account] else { throw BrokerError.notSignedIn(provider.name) }
        guard account.state == .ready else {
            throw BrokerError.signInAgain(provider.name, account.displayName)
        }
        if account.machine && provider.config.clientSecret == nil {
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) uses grant = \"client_credentials\", which needs the client's secret: store it with `authctl set-secret --provider \(provider.name) < FILE`, or set client_secret under [providers.\(provider.name)] in config.toml")
        }
        return account
    }

    /// Sends the refresh (a machine account's client-credentials grant) and returns the
    /// answer with what was sent; a failure is handled (`failed`) and thrown.
    private func send(_ key: CacheKey, account: Account, provider: Provider,
                      metadata: ProviderMetadata) async throws(BrokerError) -> (TokenResponse, Sent) {
        let chain = account.chain(for: key.resource, rule: provider.config.refreshTokens)
        let refreshToken = account.refreshToken(of: chain)
        // A provider that keeps one live access token per refresh token revokes the chain's
        // earlier tokens as it takes this refresh: none is served from here on. (One handed
        // out just before this line may still die; that is the caller's `token.reject`.)
        var revoked: [CacheKey: CachedToken] = [:]
        if provider.config.accessTokens == .onePerRefreshToken && !account.machine {
            revoked = cache.removeChain(chain, of: account.key)
        }
        let at = clock.reading()
        let keyed = try await withDPoPKey(account, provider: provider, metadata: metadata)
        let sent = Sent(account: keyed, chain: chain, refreshToken: refreshToken, revoked: revoked, at: at)
        let client = provider.client(provider.signer(of: keyed), metadata: metadata, clock: clock)
        // The provider's own parameters first; a caller's of the same name wins.
        let extra = provider.config.tokenParams.merging(key.params) { $1 }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        do {
            let scopes = key.scopes.isEmpty ? nil : key.scopes
            if keyed.machine {
                // A machine account has no grant to fall back on: ask for the configured scopes.
                let response = try await client.clientCredentials(
                    metadata, resource: key.resource, scopes: scopes ?? provider.config.scopes, extra: extra)
                return (response, sent)
            }
            let response = try await refreshRequest(
                client, metadata: metadata, refreshToken: refreshToken, resource: key.resource, scopes: scopes,
                extra: extra, sent: at, provider: provider, account: (keyed, chain, revoked))
            return (response, sent)
        } catch {
            throw await failed(error, sent: sent, asking: key, provider: provider)
        }
    }

    /// A refresh that failed: a refused refresh token ends the sign-in (or the resource's
    /// own sign-in); an unreachable provider's chain tokens are served again; every other
    /// failure is the provider's, with its back-off. Returns the error to throw.
    private func failed(_ error: OAuthError, sent: Sent, asking key: CacheKey, provider: Provider) async -> BrokerError {
        let account = sent.account
        counters.providerErrors.increment()
        let refused = account.machine ? error.isInvalidGrant
            : error.refusesRefreshToken || refusedAgain(error, sent.refreshToken, of: account, chain: sent.chain, asking: key)
        if refused, let chain = sent.chain {
            return await dropChain(chain, of: account, provider: provider)
        }
        if refused {
            return await signInRequired(account, provider: provider)
        }
        if case .provider("invalid_target", _, _) = error {
            return invalidTarget(key.resource, account: account, chain: sent.chain, provider: provider)
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
        if case .providerUnreachable = failure { cache.restore(sent.revoked) }
        logger.warning("refresh failed", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
        return failure
    }

    /// The account's refresh token was refused: the account needs a new sign-in.
    private func signInRequired(_ account: Account, provider: Provider) async -> BrokerError {
        accounts.update(account.key) { $0.state = .loginRequired }
        cache.removeAll(for: account.key)
        // Remembered in the item, so `account.list` says so after a restart too.
        await accounts.writes.storeAsItIs(account.key)
        logger.warning("refresh token refused: sign-in required", metadata: ["account": "\(account.key)"])
        events.emit(BrokerEvent(kind: .loginRequired, provider: provider.name, account: account.displayName,
                                subject: account.key.subject))
        return BrokerError.signInAgain(provider.name, account.displayName)
    }

    /// The provider took the refresh: its back-off and outage end, and the rotated refresh
    /// token (or a new, verified ID token) is kept before anything else is decided.
    private func keepAnswer(_ response: TokenResponse, sent: Sent, provider: Provider, metadata: ProviderMetadata,
                            resource: String?) async {
        let account = sent.account
        await provider.succeeded()
        invalidRequests.withLock { _ = $0.removeValue(forKey: Self.chainKey(account.key, sent.chain)) }
        noteClockSkew(of: provider, response: response, sentAt: sent.at.wall)
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
        if !account.machine, let rotated = response.refreshToken, rotated != sent.refreshToken {
            await accounts.writes.keepRotation(rotated, idToken: idToken, of: account, chain: sent.chain, resource: resource)
        } else if !account.machine, let idToken {
            await accounts.writes.keepIDToken(idToken, of: account.key)
        }
    }

    /// Refuses an answer whose access token cannot be served (after the rotated refresh
    /// token is kept: the provider took the refresh): one it marked unusable, or a Bearer
    /// token where DPoP is set.
    private func checkUsable(_ response: TokenResponse, of account: Account, provider: Provider) async throws(BrokerError) {
        if let unusable = response.unusable {
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
    }

    /// The token the answer brought, cached under `key` and announced: refused when it is
    /// spent on issue (the provider's fault, with its back-off).
    private func cachedToken(_ response: TokenResponse, for key: CacheKey, sent: Sent,
                             provider: Provider) async throws(BrokerError) -> CachedToken {
        let account = sent.account
        let exp = CachedToken.jwtExpiry(response.accessToken)
        let received = clock.reading()
        let expiry = CachedToken.expiry(sent: sent.at, received: received, expiresIn: response.expiresIn, exp: exp)
        if expiry.life(at: sent.at) <= TokenCache.reserve {
            throw await spentOnIssue(response, exp: exp, sentAt: sent.at.wall, account: account, provider: provider)
        }
        // What was sent as `scope`: a machine account without scopes asked for the configured ones.
        let asked = key.scopes.isEmpty && account.machine ? provider.config.scopes : key.scopes
        let missing = CachedToken.notGranted(answered: response.scope, asked: key.scopes)
        if !missing.isEmpty {
            logger.notice("\(provider.name) granted fewer scopes than asked for: not \(missing.joined(separator: " ")); the token is served with the scope it has", metadata: ["account": "\(account.key)", "resource": "\(key.resource ?? "-")"])
        }
        let token = CachedToken(
            accessToken: response.accessToken, tokenType: response.tokenType,
            expiry: expiry, scope: CachedToken.scope(answered: response.scope, asked: asked), chain: sent.chain)
        cache.store(token, for: key, now: received)
        events.emit(BrokerEvent(kind: .tokenRefreshed, provider: key.account.provider, account: account.displayName,
                                subject: key.account.subject, resource: key.resource, scopes: key.scopes,
                                expiresAt: Int64(expiry.expiresAt)))
        logger.debug("refreshed", metadata: ["account": "\(account.key)", "resource": "\(key.resource ?? "-")", "expires_in": "\(response.expiresIn ?? 300)", "expires_at": "\(Int64(expiry.expiresAt))"])
        return token
    }

    /// An access token spent on issue, however fast the answer came: asking again gets the
    /// same. The provider's fault, with its back-off, as for any token answer that cannot
    /// be used. Returns the error to throw.
    private func spentOnIssue(_ response: TokenResponse, exp: Double?, sentAt: Double, account: Account,
                              provider: Provider) async -> BrokerError {
        counters.providerErrors.increment()
        let why: String
        if let exp, exp < CachedToken.expiry(sentAt: sentAt, expiresIn: response.expiresIn) {
            why = "it issued an access token whose exp, \(JWT.utc(exp)), is past by this computer's clock (\(JWT.utc(sentAt))), so resource servers would refuse it: \(provider.name)'s clock is behind this computer's or this one is ahead; correct whichever is wrong (timedatectl shows this computer's)"
        } else {
            why = "it issued an access token that lives \(response.expiresIn ?? 0) s, too short to be served (authbroker never serves a token with less than a second left): check the access token lifetime for client \(provider.config.clientID) at the provider"
        }
        let failure = await provider.failed(.invalidResponse(why), doing: "token refresh")
        logger.warning("refresh answered with an access token that lives too short to be served", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
        return failure
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
        await accounts.writes.storeAsItIs(account.key)
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
        var made = account
        made.dpop = try provider.newDPoPSigner(metadata: metadata)
        let updated = await accounts.writes.keepDPoPKey(of: made)
        guard !account.machine else { return updated }  // machine accounts store nothing
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
