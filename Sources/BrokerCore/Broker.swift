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
    let logins = LoginSessions()

    public init(config: BrokerConfig, store: any CredentialStore, transport: any HTTPTransport,
                socketPath: String, clock: WallClock = .system, logger: Logger) {
        self.store = store
        self.transport = transport
        self.idTokens = IDTokenVerifier(keys: JWKSCache(transport: transport))
        self.clock = clock
        self.logger = logger
        self.socketPath = socketPath
        self.startedAt = clock.now()
        self.table = Mutex(ProviderTable(config: config, keeping: [:], transport: transport, clock: clock))
    }

    /// The configuration in force.
    public var config: BrokerConfig { table.withLock { $0.config } }

    /// The provider of that name, if configured.
    func provider(named name: String) -> Provider? { table.withLock { $0.providers[name] } }

    /// The provider a request without a name means: the only one configured.
    func soleProvider() -> Provider? {
        table.withLock { t in
            if let d = t.config.daemon.defaultProvider { return t.providers[d] }
            return t.config.providers.count == 1 ? t.providers[t.config.providers[0].name] : nil
        }
    }

    /// Checks the store and loads the accounts it holds for the configured providers.
    public func start() async throws(BrokerError) {
        let items: [StoredCredential]
        do {
            try await store.check()
            items = try await store.loadAll()
        } catch {
            throw BrokerError.storeUnavailable(message: error.message)
        }
        let config = self.config
        for p in config.providers where p.grant == .clientCredentials && accounts[Account.machine(for: p).key] == nil {
            accounts.put(Account.machine(for: p))
        }
        var secrets: [String: String] = [:]
        for item in items {
            guard let p = config.provider(named: item.provider), p.issuer == item.issuer, p.clientID == item.clientID else { continue }
            if let secret = ClientSecretItem.secret(from: item) {
                secrets[p.name] = secret
            } else if let account = AccountSecret.account(from: item), accounts[account.key] == nil {
                accounts.put(account)
            }
        }
        if !secrets.isEmpty { useStoredSecrets(secrets) }
        logger.info("loaded accounts from the store", metadata: ["count": "\(accounts.list().count)", "store": "\(store.kind)"])
    }

    // MARK: Resolution

    func provider(_ name: String?) throws(BrokerError) -> Provider {
        if let name {
            guard let p = provider(named: name) else {
                let known = config.providers.map(\.name).joined(separator: ", ")
                throw BrokerError.unknownProvider(message: "no provider named \(name) is configured (configured: \(known))")
            }
            return p
        }
        guard let p = soleProvider() else {
            let known = config.providers.map(\.name).joined(separator: ", ")
            throw BrokerError.unknownProvider(message: "several providers are configured (\(known)): choose one with --provider, or set default_provider in [daemon]")
        }
        return p
    }

    /// The account a request means: the one named (by subject, username or display name), or the only one.
    func account(of provider: String, named name: String?) throws(BrokerError) -> Account {
        let all = accounts.list(provider: provider)
        if let name {
            guard let a = all.first(where: { $0.isNamed(name) }) else {
                throw BrokerError.loginRequired(provider: provider, message: "no account \(name) is signed in to \(provider): run `authctl login --provider \(provider)`")
            }
            return a
        }
        guard let first = all.first else { throw BrokerError.notSignedIn(provider) }
        guard all.count == 1 else {
            let names = all.map(\.displayName).joined(separator: ", ")
            throw BrokerError.invalidRequest(message: "several accounts are signed in to \(provider) (\(names)): choose one with --account")
        }
        return first
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
        accounts.remove(key)
        cache.removeAll(for: key)
    }

    // MARK: Listing

    public func accountList() -> AccountListResult {
        AccountListResult(accounts: accounts.list().map(\.info))
    }

    public func status() -> DaemonStatusResult {
        let now = clock.now()
        let providers = config.providers.map { p in
            ProviderStatus(
                name: p.name, issuer: p.issuer, clientID: p.clientID,
                accounts: accounts.list(provider: p.name).map { a in
                    AccountStatus(account: a.info, tokens: cache.entries(for: a.key, now: now).map {
                        CachedTokenInfo(resource: $0.key.resource, scopes: $0.key.scopes, expiresAt: Int64($0.token.expiresAt))
                    })
                })
        }
        return DaemonStatusResult(
            version: BrokerVersion.current, pid: Int32(getpid()), uptimeSeconds: (now - startedAt),
            store: store.kind, socket: socketPath, providers: providers, counters: counters.snapshot())
    }
}

extension Account {
    var info: AccountInfo {
        AccountInfo(provider: key.provider, subject: key.subject, username: username, state: state.rawValue,
                    displayName: displayName)
    }
}

#if canImport(Glibc)
import Glibc
#endif
