import BrokerProtocol
import SecretStore

/// What the status service may read of the others: the providers in force, the accounts
/// and the store's kind and failure, the token cache's entries, the counters. Built by the
/// composition root over the parts it built, so `daemon.status` reads these and can change
/// nothing.
struct StatusReadings: Sendable {
    private let providers: ProvidersService
    private let accounts: AccountsService
    private let cache: TokenCache
    /// The daemon's counters (also what the root hands the server: `Broker.counters`).
    let counters: BrokerCounters

    init(providers: ProvidersService, accounts: AccountsService, cache: TokenCache, counters: BrokerCounters) {
        self.providers = providers
        self.accounts = accounts
        self.cache = cache
        self.counters = counters
    }

    /// The providers of the configuration in force.
    var providerConfigs: [ProviderConfig] { providers.config.providers }

    /// Why the last reload was refused, while it stands.
    var reloadRefusal: ReloadRefusedStatus? { providers.reloadRefusal }

    /// The provider's accounts, sorted.
    func accounts(of provider: String) -> [Account] { accounts.list(provider: provider) }

    /// The account's cached tokens (keys and expiries; the values stay in the cache's hands).
    func cachedEntries(for account: AccountKey, now: ClockReading) -> [(key: CacheKey, token: CachedToken)] {
        cache.entries(for: account, now: now)
    }

    /// `AccountsService.storeFailure`.
    var storeFailure: StoreError? { accounts.storeFailure }

    /// What kind of store holds the sign-ins.
    var storeKind: String { accounts.storeKind }
}
