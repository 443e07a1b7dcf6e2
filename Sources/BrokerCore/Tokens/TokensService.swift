import BrokerProtocol
import Logging
import OAuth
import SecretStore

/// Waits for a provider's sign-in on demand (`token.get` with `wait_for_sign_in`): the
/// sign-in service's `SignInOnDemand`, seen from the tokens service as this one call.
protocol SignInWaiting: Sendable {
    /// Returns once the provider's pending sign-in (started or joined) finishes, at most
    /// `seconds` later; throws what ended it otherwise.
    func awaitSignIn(provider name: String, seconds: Int) async throws(BrokerError)
}

/// The tokens service: `token.get` and `token.reject`. Answers cache hits on the caller's
/// thread (`cachedToken`), refreshes otherwise through the `Refresher` (one refresh per
/// refresh token at a time), serves a cached token while the provider is down, starts the
/// background refresh of keys in use (`RefreshAhead`), and bounds what callers choose
/// (scopes, params, `max_tokens_per_account`).
///
/// Owns: the `TokenCache` and the `RefreshAhead` (built by the composition root, which
/// hands the sign-in, sign-out and reload only `TokenForgetting` over them, the exchanges
/// `TokensForExchange`, the proofs `TokensForProofs` and the status `StatusReadings`).
/// Depends on providers, accounts, the refresher and, for `wait_for_sign_in`,
/// `SignInWaiting`. Its state is private: the others reach it only through those values.
public final class TokensService: RegistersMethods, Sendable {
    private let cache: TokenCache
    private let refresher: Refresher
    private let ahead: RefreshAhead
    private let accounts: AccountsService
    private let providers: ProvidersService
    private let counters: BrokerCounters
    private let signIns: any SignInWaiting
    /// For a resource no provider in force lists (RFC 9728); nil: such resources are refused.
    private let discovery: (any ResourceDiscovering)?
    private let clock: WallClock
    private let logger: Logger

    init(refresher: Refresher, ahead: RefreshAhead, accounts: AccountsService, providers: ProvidersService,
         counters: BrokerCounters, signIns: any SignInWaiting, discovery: (any ResourceDiscovering)? = nil,
         clock: WallClock, logger: Logger) {
        self.cache = refresher.cache
        self.refresher = refresher
        self.ahead = ahead
        self.accounts = accounts
        self.providers = providers
        self.counters = counters
        self.signIns = signIns
        self.discovery = discovery
        self.clock = clock
        self.logger = logger
    }


    /// The answer from the cache, without waiting: nil when the token must be refreshed
    /// (or the request fails), in which case the caller goes on to `token(_:)`.
    public func cachedToken(_ request: TokenGetParams) -> TokenGetResult? {
        // Read before anything the answer rests on: a change after this makes the stamp stale.
        let generation = self.generation
        // Runs on the event loop for every request: short locks, no sorted copies, no
        // thrown errors. Anything unusual returns nil and `token(_:)` answers it, an
        // out-of-range min_ttl included (it is refused there, cached or not).
        if let minTTL = request.minTTL, !TokenGetParams.minTTLRange.contains(minTTL) { return nil }
        let choice = accounts.choose(provider: request.provider, account: request.account, resource: request.resource,
                                     context: accountContext(request))
        guard case .found(let provider, let account) = choice.resolution,
              provider.grants(resource: request.resource, scopes: request.scopes ?? [], paramNames: request.params?.keys),
              account.state == .ready, !provider.isDiscovered || !providers.discoveryIsOff
        else { return nil }
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], params: request.params)
        let margin = providers.refreshMargin
        let minimumLife = Double(max(margin, request.minTTL ?? 0))
        let now = clock.reading()
        guard let token = cache.lookup(key, now: now, minimumLife: minimumLife) else { return nil }
        counters.cacheHits.increment()
        var answer = result(token, key: key, account: account, at: now)
        answer.chosenBy = choice.chosenBy.label
        if provider.config.refreshAhead {
            // Each request must be noted for the background refresh: no stamp, so the
            // front door never answers this request without asking here.
            ahead.askedFor(key, provider: provider)
        } else {
            answer.cacheHit = CacheHitStamp(generation: generation, deadline: token.deadline, exp: token.exp ?? .infinity,
                                            offset: now.offset, minimumLife: max(minimumLife, TokenCache.reserve))
        }
        return answer
    }

    /// Changes whenever anything a cache hit's answer rests on may have changed: a token
    /// stored, refreshed, rejected or dropped, an account added, changed or signed out, the
    /// configuration reloaded. Each part only ever grows, so their sum is unchanged only
    /// while none of them changed.
    var generation: UInt64 {
        cache.generation &+ accounts.generation &+ providers.generation
    }

    /// Whether the request a cache hit answered (`cachedToken`'s `cacheHit`) would be
    /// answered with the same bytes now: nothing it rests on changed, and the token still
    /// has the life the request needs, by the same test as the cache's. Counts the request
    /// and the hit when it would, as the method table and `cachedToken` do. Nothing in the answer depends on
    /// the time (`expires_at` is absolute): a stamp stays good across seconds until the
    /// token's life runs short, on either clock, or the wall clock steps (which moves
    /// `expires_at`).
    package func stillServes(_ stamp: CacheHitStamp) -> Bool {
        guard generation == stamp.generation,
              stamp.stands(wall: clock.now(), boot: clock.boottime(), stepNoticed: CachedToken.stepNoticed) else { return false }
        countRequest()
        counters.cacheHits.increment()
        return true
    }

    /// `token_requests`: one `token.get` the caller policy let through, whichever path then
    /// answers it (the method table's `counted`, and the front door's memo in `stillServes`).
    private func countRequest() {
        counters.tokenRequests.increment()
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
            var error = error
            if case .untrustedServer = error, let discovery {
                // A waiting program: the user is asked on the desktop first.
                try await discovery.askTrust(error)
                do { return try await tokenNow(request) } catch let next { error = next }
            }
            guard case .loginRequired(let name, _) = error else { throw error }
            try await signIns.awaitSignIn(provider: name, seconds: wait)
            return try await tokenNow(request)
        }
    }

    /// What the request says about the caller's context, for the provider's account rules
    /// (the working directory is read later, off the cache-hit path, if a rule needs it).
    func accountContext(_ request: TokenGetParams) -> AccountContext {
        AccountContext(gitRemote: request.context?.gitRemote, hint: request.accountHint, home: CallerDirectory.home)
    }

    /// `token(_:)` without waiting for a sign-in: `login_required` at once.
    private func tokenNow(_ request: TokenGetParams) async throws(BrokerError) -> TokenGetResult {
        try Self.checkMinTTL(request.minTTL)
        try Self.checkParams(request.params)
        // The request's own mistakes first, before the account: "not signed in" would send
        // the user to sign in only to be refused afterwards.
        let provider = try await provider(for: request)
        try provider.checkCallerChoices(scopes: request.scopes, params: request.params)
        let (_, account, choice) = try accounts.chosen(provider: provider.name, account: request.account, context: accountContext(request))
        guard account.state == .ready else {
            throw BrokerError.signInAgain(provider.name, account.displayName)
        }
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], params: request.params)
        try await checkAskedAtSignIn(key, provider: provider)
        // After the answer is in the cache: the background refresh starts from it.
        defer { ahead.askedFor(key, provider: provider) }
        let minimumLife = minimumLife(request.minTTL)
        let now = clock.reading()
        if let token = cache.lookup(key, now: now, minimumLife: minimumLife) {
            counters.cacheHits.increment()
            return result(token, key: key, account: account, at: now).chosen(by: choice)
        }
        let token: CachedToken
        do {
            token = try await refresher.queue(for: account.key).run(key, waiting: refresher.callerWait(provider)) { () async throws(BrokerError) -> CachedToken in
                // Another request may have filled the cache while this one waited its turn.
                if let token = self.cache.lookup(key, now: self.clock.reading(), minimumLife: minimumLife) { return token }
                try self.refresher.checkRoom(for: key, provider: provider, account: account)
                return try await self.refresher.servableRefresh(key, provider: provider)
            }
            // Not in the cache when asked: refreshed for this request (or by the one it joined).
            AuditNote.note(.refreshed)
        } catch {
            // refresh_margin is the broker's own preference: while the provider cannot be
            // reached, a token that still meets the caller's min_ttl is better than none.
            guard case .providerUnreachable = error,
                  let stale = cache.lookup(key, now: clock.reading(), minimumLife: Double(request.minTTL ?? 0))
            else { throw error }
            if provider.outage.servedFromCache() {
                logger.notice("\(provider.name) cannot be reached: serving cached tokens while they last (one line when it answers again)")
            }
            return result(stale, key: key, account: account, at: clock.reading()).chosen(by: choice)
        }
        let served = clock.reading()
        try Self.checkLife(token, minTTL: request.minTTL, now: served, provider: provider.name)
        try await checkGranted(token, key: key, provider: provider)
        return result(token, key: key, account: account, at: served).chosen(by: choice)
    }

    /// A discovered resource asked for scopes its provider's sign-in never asked for: no
    /// refresh can grant them (RFC 6749 §6; some providers answer such a refresh as if the
    /// refresh token were spent), so the next sign-in asks for them, a new consent.
    private func checkAskedAtSignIn(_ key: CacheKey, provider: Provider) async throws(BrokerError) {
        guard provider.isDiscovered, let discovery, !key.scopes.isEmpty else { return }
        let missing = key.scopes.filter { !provider.config.scopes.contains($0) }
        guard !missing.isEmpty else { return }
        throw await discovery.consentNeeded(provider: provider.name, resource: key.resource, scopes: missing)
    }

    /// A discovered resource asked for scopes (a challenge's `insufficient_scope`, RFC 6750
    /// §3.1) that the refresh did not grant: the sign-in must be made again with them, a
    /// new consent, since a refresh cannot widen a grant (RFC 6749 §6). The token is not
    /// served for scopes it lacks.
    private func checkGranted(_ token: CachedToken, key: CacheKey, provider: Provider) async throws(BrokerError) {
        guard provider.isDiscovered, let discovery, !key.scopes.isEmpty, let scope = token.scope else { return }
        let granted = Set(scope.split(separator: " ").map(String.init))
        let missing = key.scopes.filter { !granted.contains($0) }
        guard !missing.isEmpty else { return }
        _ = cache.remove(key)
        throw await discovery.consentNeeded(provider: provider.name, resource: key.resource, scopes: missing)
    }

    /// The provider that serves the request's resource: the one named (or the default), if
    /// it lists the resource; else the one the resource's metadata names (RFC 9728), never
    /// a guess. Every new resource costs a request to the provider, so only listed or
    /// discovered ones are asked for: a caller cannot make the daemon send thousands.
    private func provider(for request: TokenGetParams) async throws(BrokerError) -> Provider {
        let found = providers.provider(orDefault: request.provider, resource: request.resource)
        if let found, found.config.serves(resource: request.resource) {
            if found.isDiscovered, providers.discoveryIsOff, let resource = request.resource { throw DiscoveryService.off(resource) }
            return found
        }
        /// The named (or default) provider does not list the resource, and `why` nothing else decided.
        func notListed(_ provider: Provider, _ why: String? = nil) -> BrokerError {
            .invalidRequest(message: "resource is not one of the resources of [providers.\(provider.name)] in config.toml\(why.map { ", and \($0)" } ?? ""): add it there (and sign in again), or set any_resource = true there")
        }
        // A resource config.toml lists is config.toml's to place: several providers listing
        // it (and no default) is the caller's choice to make, never discovery's guess.
        let listed = request.resource.map { r in providers.config.configuredProviders.contains { $0.resources.contains(r) } } ?? false
        guard let resource = request.resource, let discovery, request.provider == nil || found != nil, !(found == nil && listed) else {
            guard let found else { throw providers.providerMissing(request.provider) }
            throw notListed(found)
        }
        if providers.discoveryIsOff {
            guard let found else { throw DiscoveryService.off(resource) }
            throw notListed(found, "[discovery] mode = \"off\"")
        }
        do {
            return try await discovery.provider(serving: resource, named: request.provider)
        } catch .invalidRequest(let why) where found != nil {
            // The metadata could not decide: the configured provider's sentence, with why.
            throw found.map { notListed($0, "its metadata names no provider (\(why))") } ?? .invalidRequest(message: why)
        } catch .providerUnreachable(let host, _, let why) where found != nil && host == ResourceURL.host(of: resource) {
            // Its metadata could not even be read: config.toml is the way that needs no network.
            throw found.map { notListed($0, why) } ?? .invalidRequest(message: why)
        }
    }

    /// Refuses a token just minted that cannot be served: shorter-lived than the caller's
    /// `min_ttl`, or than the cache's reserve second.
    static func checkLife(_ token: CachedToken, minTTL: Int?, now: ClockReading, provider: String) throws(BrokerError) {
        let left = token.life(at: now)
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
        Double(max(providers.refreshMargin, minTTL ?? 0))
    }

    func result(_ token: CachedToken, key: CacheKey, account: Account, at now: ClockReading) -> TokenGetResult {
        TokenGetResult(cached: token, at: now, resource: key.resource, provider: key.account.provider, account: account.displayName)
    }

    /// Extra token parameters: none of the protocol's own names, and a sensible size.
    static func checkParams(_ params: [String: String]?) throws(BrokerError) {
        guard let params, !params.isEmpty else { return }
        let reserved = TokenRequestParameters.reserved(in: params.keys)
        guard reserved.isEmpty else {
            throw BrokerError.invalidRequest(message: "params may not set \(reserved.joined(separator: ", ")): authbroker sets it itself")
        }
        guard params.count <= 16, params.allSatisfy({ !$0.key.isEmpty && $0.key.utf8.count <= 128 && $0.value.utf8.count <= 4096 }) else {
            throw BrokerError.invalidRequest(message: "params may hold up to 16 names of up to 128 bytes, each with a value of up to 4096 bytes")
        }
    }

    /// The cache key that holds `accessToken`, if it is cached: what a token is for.
    func key(holding accessToken: String) -> CacheKey? { cache.key(holding: accessToken) }

    /// Drops the rejected token from the cache: the next `token.get` for its key refreshes.
    public func rejectToken(_ params: TokenRejectParams) throws(BrokerError) -> TokenRejectResult {
        let key: CacheKey
        if let token = params.accessToken {
            guard params.resource == nil, params.scopes == nil, params.provider == nil, params.account == nil, params.params == nil else {
                throw BrokerError.invalidRequest(message: "give either access_token or the token's provider, account, resource, scopes and params, not both")
            }
            guard let found = cache.key(holding: token) else { return TokenRejectResult(dropped: false) }
            key = found
            guard cache.remove(found, ifHolding: token) else { return TokenRejectResult(dropped: false) }
        } else {
            let (_, account) = try accounts.resolved(provider: params.provider, account: params.account)
            key = CacheKey(account: account.key, resource: params.resource, scopes: params.scopes ?? [], params: params.params)
            guard cache.remove(key) else { return TokenRejectResult(dropped: false) }
        }
        logger.notice("a caller rejected a cached token; the next request refreshes it",
                      metadata: ["account": "\(key.account)", "resource": "\(key.resource ?? "-")"])
        return TokenRejectResult(dropped: true)
    }

    /// What `token.reject` asks of the policy: a caller may reject only what it may get.
    /// The token's (or key's) provider, resource, scopes, params and exchange audience must
    /// be granted to it, as for `token.get` and `token.exchange`; otherwise one program
    /// could make the broker refresh another's tokens at will. A token that is not cached
    /// has nothing to drop and nothing to guard. (The cache is read here, by the policy's
    /// question, only to learn what the token is for: nothing is served or dropped.)
    func rejectQuestion(_ params: TokenRejectParams) -> PolicyQuestion? {
        guard let token = params.accessToken else {
            return .reject(provider: params.provider, targets: [params.resource], scopes: params.scopes ?? [],
                          params: params.params.map { Array($0.keys) } ?? [])
        }
        guard let key = cache.key(holding: token) else { return nil }
        // An exchanged token is for its resource and its audience (one of them may be
        // absent); any other for its resource, nil being the default audience.
        var targets: [String?] = [key.resource]
        if let exchange = key.exchange {
            let named: [String] = [key.resource, exchange.audience].compactMap { $0 }
            targets = named
        }
        return .reject(provider: key.account.provider, targets: targets, scopes: key.scopes, params: Array(key.params.keys))
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .tokenGet, empty: TokenGetParams(),
            access: .checked("the token: provider, resource, scopes and params names") { p in
                .token(provider: p.provider, targets: [p.resource], scopes: p.scopes ?? [], params: p.params.map { Array($0.keys) } ?? [])
            },
            // A caller waiting for a sign-in is one of its waiters: gone, it stops waiting.
            cancelledOnClose: { $0.waitForSignIn != nil },
            mints: true,
            // Every request the policy lets through, whichever path answers it (`stillServes`
            // counts those the front door answers from its memo).
            counted: { self.countRequest() },
            audit: { p, r in AuditSubject(method: .tokenGet, provider: r?.provider ?? p.provider, account: r?.account ?? p.account, resource: p.resource) },
            answer: .nowOrLater(fast: { self.cachedToken($0) },
                                slow: { p throws(BrokerError) in try await self.token(p) })))
        registrar.add(MethodSpec(
            .tokenReject, empty: TokenRejectParams(),
            access: .checked("the rejected token's provider, resource (and exchange audience), scopes and params, as token.get and token.exchange") { p in
                self.rejectQuestion(p)
            },
            answer: .later { p throws(BrokerError) in try self.rejectToken(p) }))
    }
}
