import BrokerProtocol
import Logging
import SecretStore

/// The accounts service: the accounts the daemon knows (`AccountRegistry`), whether the
/// store's accounts are loaded (`StoreAvailability`) and the background watch for a store
/// that could not be read, and the one reading of a request's `provider` and `account`.
/// Registers `account.list`.
///
/// Owns: the registry, the availability, and the accounts' persistence rules and each
/// account's turn (`writes`, `AccountWrites`: every write of an account to the store goes
/// through it). Depends on the providers service (which providers exist, and where stored
/// client secrets go) and the store.
public final class AccountsService: RegistersMethods, Sendable {
    private let registry: AccountRegistry
    private let availability = StoreAvailability()
    private let store: any CredentialStore
    /// How an account reaches the store: memory first, unsaved, the background retry, in
    /// turn with its refreshes (`AccountWrites`).
    let writes: AccountWrites
    private let providers: ProvidersService
    private let logger: Logger
    /// How long the background watch for an unavailable store waits between tries, at most.
    private let storeRetryInterval: Duration

    public init(providers: ProvidersService, store: any CredentialStore, logger: Logger,
                storeRetryInterval: Duration = .seconds(5)) {
        let registry = AccountRegistry()
        self.registry = registry
        self.providers = providers
        self.store = store
        self.logger = logger
        self.storeRetryInterval = storeRetryInterval
        self.writes = AccountWrites(registry: registry, store: store, logger: logger)
    }

    /// Loads the accounts the store holds for the configured providers. A store that
    /// cannot be read (no keyring, a locked or hung one) does not stop the start: the
    /// daemon serves in the "secret store unavailable" state (`storeFailure`) and reads the
    /// store again in the background until it can (`watchStore`).
    public func start() async {
        addMachineAccounts(for: providers.config)
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

    // MARK: The registry

    subscript(key: AccountKey) -> Account? { registry[key] }

    /// Changes with every change to the accounts (never goes back): part of `TokensService.generation`.
    var generation: UInt64 { registry.generation }

    func put(_ account: Account) { registry.put(account) }

    /// `put`, only while the account under its key is still the same one (issuer, client).
    func replace(ifStill account: Account) -> Bool { registry.replace(ifStill: account) }

    @discardableResult
    func remove(_ key: AccountKey) -> Account? { registry.remove(key) }

    func update(_ key: AccountKey, _ change: (inout Account) -> Void) { registry.update(key, change) }

    /// The accounts of one provider, or of all, sorted for stable listings.
    func list(provider: String? = nil) -> [Account] { registry.list(provider: provider) }

    public func accountList() -> AccountListResult {
        AccountListResult(accounts: list().map(\.info), storeUnreadable: availability.failure.map {
            "the sign-ins kept in the secret store cannot be read yet (\($0.message)); they are listed once authbrokerd can read it"
        })
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
        /// No name given, and an account rule needs the caller's working directory, which
        /// the cache-hit path does not read: the slow path decides.
        case needsCaller
    }

    /// The one reading of a request's `provider` and `account`, for every method. The
    /// cache-hit path uses it on the event loop, so it neither throws nor builds an array;
    /// the other methods turn a miss into its sentence with `resolved(provider:account:)`.
    func resolve(provider name: String?, account accountName: String?, resource: String? = nil,
                 context: AccountContext = AccountContext()) -> Resolution {
        choose(provider: name, account: accountName, resource: resource, context: context).resolution
    }

    /// `resolve`, with what chose the account (`chosen_by`). The order: the request's
    /// `account`; the provider's account rules, first match first; `default_account` when
    /// several are signed in; the only account. Builds no array and reads no file: a
    /// directory rule met before a match, with the directory unread, is `.needsCaller`.
    func choose(provider name: String?, account accountName: String?, resource: String? = nil,
                context: AccountContext) -> (resolution: Resolution, chosenBy: AccountChoice) {
        guard let provider = providers.provider(orDefault: name, resource: resource) else {
            return (name.map { .unknownProvider($0) } ?? .noDefaultProvider, .named)
        }
        if let accountName { return (match(provider, accountName), .named) }
        let config = provider.config
        for rule in config.accountRules {
            switch rule.condition {
            case .directory(let pattern):
                guard case .read(let directory) = context.directory else { return (.needsCaller, .rule(rule)) }
                guard let directory, pattern.matches(directory, home: context.home) else { continue }
            case .gitRemote(let pattern):
                guard let remote = context.gitRemote, pattern.matches(remote) else { continue }
            case .environment:
                guard let hint = context.hint, !hint.isEmpty else { continue }
                return (match(provider, hint), .rule(rule))
            }
            return (match(provider, rule.account), .rule(rule))
        }
        switch registry.match(provider: provider.name, named: nil) {
        case .one(let account): return (.found(provider, account), .only)
        case .none: return (.noAccount(provider: provider.name, name: nil), .only)
        case .several:
            guard let fallback = config.defaultAccount else { return (.severalAccounts(provider: provider.name, name: nil), .only) }
            return (match(provider, fallback), .defaultAccount)
        }
    }

    private func match(_ provider: Provider, _ accountName: String?) -> Resolution {
        switch registry.match(provider: provider.name, named: accountName) {
        case .one(let account): return .found(provider, account)
        case .none: return .noAccount(provider: provider.name, name: accountName)
        case .several: return .severalAccounts(provider: provider.name, name: accountName)
        }
    }

    /// The provider and account a request means, or the error that says what to name.
    func resolved(provider name: String?, account accountName: String?, resource: String? = nil,
                  context: AccountContext = AccountContext()) throws(BrokerError) -> (Provider, Account) {
        let (provider, account, _) = try chosen(provider: name, account: accountName, resource: resource, context: context)
        return (provider, account)
    }

    /// `resolved`, with what chose the account. Off the cache-hit path: reads the caller's
    /// working directory when a rule needs it (`CallerDirectory`).
    func chosen(provider name: String?, account accountName: String?, resource: String? = nil,
                context: AccountContext = AccountContext()) throws(BrokerError) -> (Provider, Account, AccountChoice) {
        var context = context
        var (resolution, choice) = choose(provider: name, account: accountName, resource: resource, context: context)
        if case .needsCaller = resolution {
            context.directory = .read(CallerDirectory.current())
            (resolution, choice) = choose(provider: name, account: accountName, resource: resource, context: context)
        }
        let why = choice == .named || choice == .only ? "" : " (chosen by \(choice.label))"
        switch resolution {
        case .found(let provider, let account):
            return (provider, account, choice)
        case .unknownProvider, .noDefaultProvider:
            throw providers.providerMissing(name)
        case .noAccount(let provider, _) where availability.failure != nil:
            throw storeUnavailable(provider)
        case .noAccount(let provider, nil):
            throw BrokerError.notSignedIn(provider)
        case .noAccount(let provider, let accountName?):
            throw BrokerError.loginRequired(provider: provider, message: "no account \(accountName) is signed in to \(provider)\(why): run `authctl login --provider \(provider)`")
        case .severalAccounts(let provider, let accountName?):
            let subjects = list(provider: provider).filter { $0.isNamed(accountName) }.map(\.key.subject).joined(separator: ", ")
            throw BrokerError.invalidRequest(message: "several accounts named \(accountName) are signed in to \(provider)\(why) (subjects \(subjects)): name one by its subject (`--account SUBJECT` for authctl, `account` in a request)")
        case .severalAccounts(let provider, nil):
            throw severalAccounts(provider, context: context)
        case .needsCaller:
            throw BrokerError.invalidRequest(message: "the account rules of [providers.\(name ?? "")] could not be read for this caller: choose the account with --account")
        }
    }

    /// The refusal of a request that names no account when several are signed in and
    /// nothing chose one: what the rules saw, and the three ways to choose.
    private func severalAccounts(_ provider: String, context: AccountContext) -> BrokerError {
        let names = list(provider: provider).map(\.displayName).joined(separator: ", ")
        let rules = providers.config.provider(named: provider)?.accountRules ?? []
        var seen = ""
        if !rules.isEmpty {
            var what: [String] = []
            if rules.contains(where: \.needsDirectory) {
                if case .read(let d) = context.directory { what.append("working directory \(d ?? "unknown")") }
            }
            if let remote = context.gitRemote { what.append("git remote \(remote)") }
            seen = ", and no rule of [[providers.\(provider).accounts]] matched this caller" + (what.isEmpty ? "" : " (\(what.joined(separator: ", ")))")
        }
        if context.hint != nil && !rules.contains(where: { $0.condition == .environment }) {
            seen += "; AUTHBROKER_ACCOUNT is ignored, as no rule of [[providers.\(provider).accounts]] has environment = true"
        }
        return BrokerError.invalidRequest(message: "several accounts are signed in to \(provider) (\(names))\(seen): name one (`--account` for authctl, `account` in a request), or set default_account or an account rule in [providers.\(provider)] of config.toml (docs/configuration.md, \"Which account\")")
    }

    // MARK: The store

    /// The store's failure while its accounts are not loaded (the daemon started without
    /// it), else nil.
    public var storeFailure: StoreError? { availability.failure }

    /// What kind of store holds the sign-ins (`daemon.status`).
    var storeKind: String { store.kind }

    /// The error for a request that needs an account of `provider` while the store's
    /// accounts are not loaded: not "not signed in", which would send the user to sign in
    /// again for nothing.
    func storeUnavailable(_ provider: String) -> BrokerError {
        let reason = availability.failure.map(\.message) ?? "it could not be read"
        return .storeUnavailable(message: "the sign-ins to \(provider) are in the secret store, which cannot be read yet (\(reason)); authbrokerd loads them as soon as it can", reason: availability.failure?.reason)
    }

    /// Reads the store and adds the accounts it holds for the configured providers (an
    /// account already in memory is newer and stays), then marks the store loaded.
    func loadStoredAccounts() async throws(StoreError) {
        try await store.check()
        let items = try await store.loadAll()
        // The providers discovery found before the restart, first: their accounts are theirs.
        let found = items.compactMap(DiscoveredProviderItem.provider(from:))
        if !found.isEmpty {
            providers.discovered { d in
                for p in found where d.providers[p.name] == nil { d.providers[p.name] = p }
            }
        }
        let stored = StoredAccounts(items: items, config: providers.config)
        for account in stored.accounts where registry[account.key] == nil {
            registry.put(account)
        }
        if !stored.clientSecrets.isEmpty {
            providers.replace(adding: stored.clientSecrets)
        }
        availability.set(.loaded)
        logger.info("loaded accounts from the store", metadata: ["count": "\(list().count)", "store": "\(store.kind)"])
    }

    /// The machine account of every client-credentials provider of `config` (nothing stored).
    func addMachineAccounts(for config: BrokerConfig) {
        for p in config.providers where p.grant == .clientCredentials && registry[Account.machine(for: p).key] == nil {
            registry.put(Account.machine(for: p))
        }
    }

    /// Tries the store again, from a short wait up to `storeRetryInterval` between tries,
    /// until its accounts are loaded. A poll rather than a watch of the bus name: an
    /// unlock changes no bus name, and the cost is one small D-Bus round trip per try.
    /// At most one runs.
    func watchStore() {
        guard availability.startWatching() else { return }
        let longest = storeRetryInterval
        Task { [weak self] in
            var wait = min(Duration.milliseconds(500), longest)
            while true {
                try? await Task.sleep(for: wait)
                guard let self else { return }
                do throws(StoreError) {
                    try await self.loadStoredAccounts()
                    self.availability.stopWatching()
                    self.logger.notice("the secret store is available: its accounts are loaded", metadata: ["store": "\(self.store.kind)"])
                    return
                } catch {
                    self.availability.set(.unavailable(error))
                }
                wait = min(wait * 2, longest)
            }
        }
    }

    // MARK: Reload

    /// The accounts a reload to `new` must read from the store: those of `unread`
    /// providers (added, or with another issuer or client). Nothing when the store is not
    /// loaded (its watch reads everything once it can).
    func stored(for new: BrokerConfig, only unread: Set<String>) async throws(BrokerError) -> StoredAccounts {
        guard !unread.isEmpty && availability.failure == nil else { return StoredAccounts(items: [], config: new) }
        do {
            return StoredAccounts(items: try await store.loadAll(), config: new, only: unread)
        } catch {
            throw BrokerError.storeUnavailable(
                message: "the accounts of \(unread.sorted().joined(separator: ", ")) could not be read from the secret store (\(error.message))",
                reason: error.reason)
        }
    }

    /// Replaces the accounts of the `touched` providers with those that still belong to
    /// them under `new`, and those `stored` read, in one step (a caller meets the old
    /// accounts or the new ones, never none). Returns the accounts dropped.
    func reconcile(_ touched: Set<String>, with new: BrokerConfig, stored: StoredAccounts) -> [Account] {
        let dropped = registry.replace(providers: touched) { current in
            var next: [AccountKey: Account] = [:]
            for account in current {
                guard let p = new.provider(named: account.key.provider), account.belongs(to: p) else { continue }
                next[account.key] = account
            }
            for account in stored.accounts where next[account.key] == nil {
                next[account.key] = account
            }
            return Array(next.values)
        }
        addMachineAccounts(for: new)
        return dropped
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .accountList, empty: NoParams(),
            access: .open("lists who is signed in and whether each account is ready: management the user runs (`authctl status`), no token or claim"),
            answer: .now { _ in self.accountList() }))
    }
}

extension Account {
    var info: AccountInfo {
        AccountInfo(provider: key.provider, subject: key.subject, username: username, state: state,
                    displayName: displayName, unsaved: unsaved ? unsavedNote : nil,
                    unsavedReason: unsaved ? (unsavedBecause?.reason ?? "pending") : nil)
    }

    /// What an account whose newest refresh token only memory holds must tell the user:
    /// why, and what a restart or reboot would cost now.
    var unsavedNote: String {
        let why = unsavedBecause.map { "the secret store refused it: \($0.message)" } ?? "it is being written to the secret store"
        return "its newest refresh token is only in authbrokerd's memory (\(why)); authbrokerd writes it as soon as the store takes it, and a restart or reboot before then loses this sign-in"
    }
}
