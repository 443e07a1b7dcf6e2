import BrokerProtocol
import OAuth

/// What the exchange service (and the clouds service and `AccountIDTokens` it holds) may
/// use of the tokens service and the layers below it: the account a request names, a token
/// as `token.get` gives it, the token cache's lookups and stores, and the account's turn in
/// its `RefreshQueue`. Built by the composition root over the parts the tokens service
/// owns, so the exchanges see these calls and nothing else of it (its state is private).
struct TokensForExchange: Sendable {
    private let tokens: TokensService
    private let refresher: Refresher
    private let cache: TokenCache
    private let accounts: AccountsService
    private let providers: ProvidersService
    private let counters: BrokerCounters

    init(tokens: TokensService, refresher: Refresher, cache: TokenCache, accounts: AccountsService,
         providers: ProvidersService, counters: BrokerCounters) {
        self.tokens = tokens
        self.refresher = refresher
        self.cache = cache
        self.accounts = accounts
        self.providers = providers
        self.counters = counters
    }

    // MARK: Accounts and providers (read only)

    /// The account as memory holds it now.
    func account(_ key: AccountKey) -> Account? { accounts[key] }

    /// `AccountsService.resolved`: the provider and account a request means, or the sentence.
    func resolved(provider name: String?, account: String?, resource: String? = nil) throws(BrokerError) -> (Provider, Account) {
        try accounts.resolved(provider: name, account: account, resource: resource)
    }

    /// `AccountsService.resolve`, for the cache-hit paths.
    func resolve(provider name: String?, account: String?, resource: String? = nil) -> AccountsService.Resolution {
        accounts.resolve(provider: name, account: account, resource: resource)
    }

    /// `refresh_margin`.
    var refreshMargin: Int { providers.refreshMargin }

    /// `[aws]` of the configuration in force.
    var aws: AWSSettings { providers.config.aws }

    // MARK: The tokens service

    /// A token as `token.get` gives it (the subject token of an exchange, STS's access token).
    func token(_ request: TokenGetParams) async throws(BrokerError) -> TokenGetResult { try await tokens.token(request) }

    /// `TokensService.minimumLife`.
    func minimumLife(_ minTTL: Int?) -> Double { tokens.minimumLife(minTTL) }

    /// `TokensService.result`: how every token answer looks.
    func result(_ token: CachedToken, key: CacheKey, account: Account, at now: ClockReading) -> TokenGetResult {
        tokens.result(token, key: key, account: account, at: now)
    }

    // MARK: The cache and the counters

    /// The cached token under `key` with `minimumLife` left.
    func lookup(_ key: CacheKey, now: ClockReading, minimumLife: Double) -> CachedToken? {
        cache.lookup(key, now: now, minimumLife: minimumLife)
    }

    /// Caches a token minted for `key` (an exchange's own key).
    func store(_ token: CachedToken, for key: CacheKey, now: ClockReading) { cache.store(token, for: key, now: now) }

    func countCacheHit() { counters.cacheHits.increment() }

    func countProviderError() { counters.providerErrors.increment() }

    // MARK: The account's queue

    /// Runs `operation` in the account's `RefreshQueue` for `key` (one at a time per key,
    /// joined by concurrent callers), the caller waiting as long as a refresh's caller does.
    func inTurn(_ key: CacheKey, provider: Provider,
                _ operation: @escaping @Sendable () async throws(BrokerError) -> CachedToken) async throws(BrokerError) -> CachedToken {
        try await refresher.queue(for: key.account).run(key, waiting: refresher.callerWait(provider), operation)
    }

    /// `Refresher.checkRoom` (`max_tokens_per_account`); call in the account's queue.
    func checkRoom(for key: CacheKey, provider: Provider, account: Account) throws(BrokerError) {
        try refresher.checkRoom(for: key, provider: provider, account: account)
    }

    /// `Refresher.withDPoPKey`; call in the account's queue.
    func withDPoPKey(_ account: Account, provider: Provider, metadata: ProviderMetadata) async throws(BrokerError) -> Account {
        try await refresher.withDPoPKey(account, provider: provider, metadata: metadata)
    }

    /// A refresh of the account's default token, in its queue: what brings a new ID token.
    func refreshInTurn(_ account: AccountKey, provider: Provider) async throws(BrokerError) {
        let key = CacheKey(account: account, resource: nil, scopes: [])
        let refresher = self.refresher
        _ = try await inTurn(key, provider: provider) { () async throws(BrokerError) -> CachedToken in
            try await refresher.servableRefresh(key, provider: provider)
        }
    }
}
