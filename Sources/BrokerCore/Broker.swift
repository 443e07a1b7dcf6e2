import BrokerProtocol
import Logging
import OAuth
import SecretStore
import Synchronization

/// The façade the server calls: tokens, accounts, sign-in, sign-out, status.
///
/// Cache hits are answered synchronously (`cachedToken`) under short locks so the server can
/// reply on its event loop; everything that talks to a provider or the store is async.
public final class Broker: Sendable {
    public let counters = BrokerCounters()
    let store: any CredentialStore
    /// The configuration and its providers; replaced whole by `reload`.
    let table: Mutex<ProviderTable>
    let transport: any HTTPTransport
    /// Checks every ID token received against its provider's keys (JWKS, cached).
    let idTokens: IDTokenVerifier
    let accounts = AccountRegistry()
    let cache = TokenCache()
    let clock: WallClock
    let logger: Logger
    let startedAt: Double
    let socketPath: String
    private let queues = Mutex<[AccountKey: RefreshQueue]>([:])
    /// Accounts whose newest refresh token is being written again (see `retrySave`).
    let resaving = Mutex<Set<AccountKey>>([])
    let logins: LoginSessions
    /// Subscribers to the broker's events (`events.subscribe`).
    public let events = EventHub()
    /// Opens the browser sign-in's loopback listener; without one only device sign-ins work.
    let redirects: (any RedirectListening)?
    /// The background refreshes of `refresh_ahead` providers.
    let ahead: RefreshAhead
    /// Shows the user that a sign-in started on demand waits for them (a desktop
    /// notification); without one, only the waiting callers can show its URL.
    let announcer: (any SignInAnnouncing)?
    /// Asks the user before a `confirm = true` rule's caller gets a token; without one,
    /// such rules serve nothing.
    let confirmer: (any CallerConfirming)?
    /// Sign-ins on demand being started, by provider: concurrent callers share one.
    let startingOnDemand = Mutex<[String: Task<LoginStartResult, any Error>]>([:])
    /// The last reload, when it was refused (`noteReload`).
    let refusedReload = Mutex<ReloadRefusedStatus?>(nil)
    /// Whether the store's accounts are loaded (see `start`).
    let availability = StoreAvailability()
    /// How long the background watch for an unavailable store waits between tries, at most.
    let storeRetryInterval: Duration

    public init(config: BrokerConfig, store: any CredentialStore, transport: any HTTPTransport,
                socketPath: String, clock: WallClock = .system, logger: Logger,
                redirects: (any RedirectListening)? = nil, announcer: (any SignInAnnouncing)? = nil,
                confirmer: (any CallerConfirming)? = nil,
                refreshAheadTick: Duration = .seconds(15), storeRetryInterval: Duration = .seconds(5)) {
        self.storeRetryInterval = storeRetryInterval
        self.ahead = RefreshAhead(tick: refreshAheadTick)
        self.announcer = announcer
        self.confirmer = confirmer
        self.store = store
        self.redirects = redirects
        self.transport = transport
        self.idTokens = IDTokenVerifier(keys: JWKSCache(transport: transport))
        self.clock = clock
        self.logins = LoginSessions(clock: clock)
        self.logger = logger
        self.socketPath = socketPath
        self.startedAt = clock.now()
        let events = self.events
        self.table = Mutex(ProviderTable(config: config, keeping: [:], transport: transport, clock: clock, events: events))
    }

    /// The configuration in force.
    public var config: BrokerConfig { table.withLock { $0.config } }

    /// Loads the accounts the store holds for the configured providers. A store that
    /// cannot be read (no keyring, a locked or hung one) does not stop the start: the
    /// broker serves in the "secret store unavailable" state (`storeFailure`) and reads the
    /// store again in the background until it can (`watchStore`).
    public func start() async {
        addMachineAccounts(for: config)
        do {
            try await loadStoredAccounts()
        } catch {
            availability.set(.unavailable(error))
            logger.warning("the secret store is unavailable: serving without the accounts it holds until it can be read", metadata: [
                "store": "\(store.kind)", "error": "\(error.message)",
            ])
            watchStore()
        }
    }

    // MARK: Resolution

    /// What a request's provider and account names point at.
    enum Resolution {
        case found(Provider, Account)
        /// No provider of that name is configured.
        case unknownProvider(String)
        /// No name given, and neither a single provider nor `default_provider`.
        case noDefaultProvider
        /// The provider has no account of that name (or none at all when `name` is nil).
        case noAccount(provider: String, name: String?)
        /// Several accounts fit: no name was given, or a username or display name several accounts share.
        case severalAccounts(provider: String, name: String?)
    }

    /// The one reading of a request's `provider` and `account`, for every method. The
    /// cache-hit path uses it on the event loop, so it neither throws nor builds an array;
    /// the other methods turn a miss into its sentence with `resolved(provider:account:)`.
    func resolve(provider name: String?, account accountName: String?) -> Resolution {
        guard let provider = provider(orDefault: name) else {
            return name.map { .unknownProvider($0) } ?? .noDefaultProvider
        }
        switch accounts.match(provider: provider.name, named: accountName) {
        case .one(let account): return .found(provider, account)
        case .none: return .noAccount(provider: provider.name, name: accountName)
        case .several: return .severalAccounts(provider: provider.name, name: accountName)
        }
    }

    /// The provider and account a request means, or the error that says what to name.
    func resolved(provider name: String?, account accountName: String?) throws(BrokerError) -> (Provider, Account) {
        switch resolve(provider: name, account: accountName) {
        case .found(let provider, let account):
            return (provider, account)
        case .unknownProvider, .noDefaultProvider:
            throw providerMissing(name)
        case .noAccount(let provider, _) where availability.failure != nil:
            throw storeUnavailable(provider)
        case .noAccount(let provider, nil):
            throw BrokerError.notSignedIn(provider)
        case .noAccount(let provider, let accountName?):
            throw BrokerError.loginRequired(provider: provider, message: "no account \(accountName) is signed in to \(provider): run `authctl login --provider \(provider)`")
        case .severalAccounts(let provider, let accountName):
            let all = accounts.list(provider: provider)
            if let accountName {
                let subjects = all.filter { $0.isNamed(accountName) }.map(\.key.subject).joined(separator: ", ")
                throw BrokerError.invalidRequest(message: "several accounts named \(accountName) are signed in to \(provider) (subjects \(subjects)): choose one with --account SUBJECT")
            }
            let names = all.map(\.displayName).joined(separator: ", ")
            throw BrokerError.invalidRequest(message: "several accounts are signed in to \(provider) (\(names)): choose one with --account")
        }
    }

    /// The provider a request means, for methods that need no account (sign-in, secrets).
    func provider(_ name: String?) throws(BrokerError) -> Provider {
        guard let provider = provider(orDefault: name) else { throw providerMissing(name) }
        return provider
    }

    /// The provider of that name, or without a name the default one: `default_provider`, or
    /// the only one configured. One lock, no copies.
    func provider(orDefault name: String?) -> Provider? {
        table.withLock { t in
            if let name { return t.providers[name] }
            if let d = t.config.daemon.defaultProvider { return t.providers[d] }
            return t.config.providers.count == 1 ? t.providers[t.config.providers[0].name] : nil
        }
    }

    private func providerMissing(_ name: String?) -> BrokerError {
        let known = config.providers.map(\.name).joined(separator: ", ")
        if let name {
            return .unknownProvider(message: "no provider named \(name) is configured (configured: \(known))")
        }
        if known.isEmpty {
            return .unknownProvider(message: "no provider is configured: add a [[provider]] to config.toml")
        }
        return .unknownProvider(message: "several providers are configured (\(known)): choose one with --provider, or set default_provider in [daemon]")
    }

    func queue(for key: AccountKey) -> RefreshQueue {
        queues.withLock { all in
            if let q = all[key] { return q }
            let q = RefreshQueue()
            all[key] = q
            return q
        }
    }

    func forget(_ key: AccountKey) {
        stopRefreshingAhead(key)
        accounts.remove(key)
        cache.removeAll(for: key)
    }

    // MARK: Listing

    public func accountList() -> AccountListResult {
        AccountListResult(accounts: accounts.list().map(\.info))
    }

    public func status() -> DaemonStatusResult {
        status(showing: { _, _ in true })
    }

    /// The status as the caller `identify` names may see it: under `[[allow]]` rules, only
    /// the cached tokens it may get itself (which resources other programs use, and when,
    /// is theirs to know). A caller that cannot be identified sees no cached token.
    public func status(for identify: CallerIdentification) -> DaemonStatusResult {
        let policy = callerPolicy
        guard !policy.isOpen else { return status() }
        let caller = (try? identify(policy.needsCgroup)) ?? nil
        return status { provider, resource in policy.allowsToken(caller, provider: provider, resource: resource) }
    }

    private func status(showing shown: (_ provider: String, _ resource: String?) -> Bool) -> DaemonStatusResult {
        let now = clock.now()
        let providers = config.providers.map { p in
            ProviderStatus(
                name: p.name, issuer: p.issuer, clientID: p.clientID,
                accounts: accounts.list(provider: p.name).map { a in
                    AccountStatus(account: a.info, tokens: cache.entries(for: a.key, now: now).filter { shown(p.name, $0.key.resource) }.map {
                        CachedTokenInfo(resource: $0.key.resource, scopes: $0.key.scopes, expiresAt: Int64($0.token.expiresAt))
                    })
                })
        }
        return DaemonStatusResult(
            version: BrokerVersion.current, pid: Int32(getpid()), uptimeSeconds: (now - startedAt),
            store: store.kind, socket: socketPath, providers: providers, counters: counters.snapshot(),
            storeUnavailable: storeFailure.map { StoreUnavailableStatus(reason: $0.reason, message: $0.message) },
            reloadRefused: reloadRefusal)
    }
}

extension Account {
    var info: AccountInfo {
        AccountInfo(provider: key.provider, subject: key.subject, username: username, state: state,
                    displayName: displayName)
    }
}

#if canImport(Glibc)
import Glibc
#endif
