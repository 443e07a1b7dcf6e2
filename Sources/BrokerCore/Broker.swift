import BrokerProtocol
import Logging
import OAuth
import SecretStore

/// The composition root: builds the domain services, each with only what it uses, and
/// hands their method registrations to the server (`register(into:)`). It holds no state
/// of its own; each service owns its own (docs/architecture.md, "Services").
///
/// Dependencies point one way: providers ← accounts ← tokens (refresher, refresh ahead)
/// ← exchange, proofs, claims, status; sign-in and sign-out depend on providers and
/// accounts and see the tokens' state only as `TokenForgetting`; the exchange, proofs and
/// status services reach the others only through the narrow values built here
/// (`TokensForExchange`, `TokensForProofs`, `StatusReadings`): each service's state is
/// private. Every write of an account goes through `AccountsService.writes`. The tokens
/// service waits for a sign-in on demand through `SignInWaiting`. The caller policy
/// (`CallerGate`) is asked by the server before any of them.
public final class Broker: Sendable {
    public let providers: ProvidersService
    public let accounts: AccountsService
    public let tokens: TokensService
    public let exchange: ExchangeService
    public let proofs: ProofsService
    public let signIns: SignInService
    public let signOut: SignOutService
    public let claims: ClaimsService
    public let status: StatusService
    public let events: EventsService
    public let discovery: DiscoveryService
    /// The caller policy the server asks about every request, before any service (the
    /// status service's, which asks it what each caller may see).
    public var gate: CallerGate { status.gate }
    /// AWS credentials and the ID token for the clouds' STS, held by the exchange service
    /// (it is one more exchange of the account's tokens; Broker stays within TypeSizeTests'
    /// 12 stored properties).
    public var clouds: CloudsService { exchange.clouds }
    private let reloading: ConfigurationReload

    /// - Parameters:
    ///   - redirects: opens the browser sign-in's loopback listener; without one only
    ///     device and terminal sign-ins work.
    ///   - announcer: shows a sign-in on demand to the user (the desktop notification).
    ///   - confirmer: asks the user before a `confirm = true` rule's caller gets a token;
    ///     without one, such rules serve nothing.
    ///   - audit: where decisions on tokens are written (the journal, or the audit file);
    ///     nil: nowhere.
    public convenience init(config: BrokerConfig, store: any CredentialStore, transport: any HTTPTransport,
                            socketPath: String, clock: WallClock = .system, logger: Logger,
                            redirects: (any RedirectListening)? = nil, announcer: (any SignInAnnouncing)? = nil,
                            confirmer: (any CallerConfirming)? = nil, trustAsker: (any ServerTrustAsking)? = nil,
                            audit: AuditTrail? = nil,
                            refreshAheadTick: Duration = .seconds(15), storeRetryInterval: Duration = .seconds(5)) {
        self.init(config: config, store: store, transport: transport, socketPath: socketPath, clock: clock, logger: logger,
                  redirects: redirects, announcer: announcer, confirmer: confirmer, trustAsker: trustAsker, audit: audit,
                  refreshAheadTick: refreshAheadTick, storeRetryInterval: storeRetryInterval, cache: TokenCache())
    }

    /// The root over a token cache the caller holds: a test that puts tokens in it as a
    /// refresh does (the tokens service's state is private to it).
    init(config: BrokerConfig, store: any CredentialStore, transport: any HTTPTransport,
         socketPath: String, clock: WallClock, logger: Logger,
         redirects: (any RedirectListening)?, announcer: (any SignInAnnouncing)?,
         confirmer: (any CallerConfirming)?, trustAsker: (any ServerTrustAsking)?, audit: AuditTrail?,
         refreshAheadTick: Duration, storeRetryInterval: Duration, cache: TokenCache) {
        let counters = BrokerCounters()
        let events = EventsService()
        let providers = ProvidersService(config: config, transport: transport, store: store, clock: clock,
                                         events: events.hub, logger: logger)
        let accounts = AccountsService(providers: providers, store: store, logger: logger, storeRetryInterval: storeRetryInterval)
        let refresher = Refresher(cache: cache, accounts: accounts, providers: providers, counters: counters,
                                  events: events.hub, logger: logger, clock: clock)
        let ahead = RefreshAhead(tick: refreshAheadTick, refresher: refresher, providers: providers, clock: clock, logger: logger)
        // The gate's leases ("Allow for N minutes"), which a sign-out of their provider ends.
        let leases = LeaseTable(clock: clock, logger: logger)
        let forgetting = TokenForgetting(cache: refresher.cache, ahead: ahead, leases: leases)
        let signIns = SignInService(providers: providers, accounts: accounts, tokens: forgetting, events: events.hub,
                                    counters: counters, redirects: redirects, announcer: announcer, logger: logger, clock: clock)
        let discovery = DiscoveryService(providers: providers, accounts: accounts, store: store, transport: transport,
                                         clock: clock, logger: logger, asker: trustAsker, tokens: forgetting)
        let tokens = TokensService(refresher: refresher, ahead: ahead, accounts: accounts, providers: providers,
                                   counters: counters, signIns: signIns.onDemand, discovery: discovery, clock: clock, logger: logger)
        // The narrow values the exchanges, the proofs and the status reach the others through.
        let forExchange = TokensForExchange(tokens: tokens, refresher: refresher, cache: refresher.cache, accounts: accounts,
                                            providers: providers, counters: counters)
        let readings = StatusReadings(providers: providers, accounts: accounts, cache: refresher.cache, counters: counters)
        let gate = CallerGate(source: providers, confirmer: confirmer, logger: logger, leases: leases, audit: audit)
        self.providers = providers
        self.accounts = accounts
        self.tokens = tokens
        self.exchange = ExchangeService(tokens: forExchange, transport: transport, clock: clock, logger: logger)
        self.proofs = ProofsService(tokens: TokensForProofs(tokens: tokens, accounts: accounts, providers: providers), clock: clock)
        self.signIns = signIns
        self.signOut = SignOutService(accounts: accounts, tokens: forgetting, events: events.hub, logger: logger,
                                      redirects: redirects)
        self.claims = ClaimsService(accounts: accounts, tokens: tokens, counters: counters, clock: clock)
        self.status = StatusService(readings: readings, gate: gate, socketPath: socketPath, clock: clock)
        self.events = events
        self.discovery = discovery
        self.reloading = ConfigurationReload(providers: providers, accounts: accounts, tokens: forgetting, logger: logger)
    }

    /// Every service's methods, handed to `registrar` (the server's method table).
    public func register(into registrar: inout some MethodRegistrar) {
        let services: [any RegistersMethods] = [tokens, exchange, proofs, accounts, claims, signIns, signOut, providers, status, events, discovery, clouds,
                                                GrantsService(leases: gate.leases)]
        for service in services { service.register(into: &registrar) }
    }

    /// Loads the accounts the store holds (`AccountsService.start`).
    public func start() async { await accounts.start() }

    /// Puts a new configuration in force (SIGHUP) as one transaction (`ConfigurationReload`).
    public func reload(_ new: BrokerConfig) async throws(BrokerError) -> ReloadSummary {
        let summary = try await reloading.reload(new)
        // A lease holds under the rule it was given under, as it was: a changed rule is another.
        gate.leases.keep(rules: providers.callerPolicy.rules)
        return summary
    }

    /// Stops what runs in the background: sign-ins in progress (their listeners closed
    /// while the event loops still run) and background refreshes; then writes the newest
    /// refresh tokens the store has not taken yet (`AccountWrites.saveUnsaved`), and says in
    /// the log which it still could not write.
    public func stop() async {
        await signIns.endAll()
        reloading.tokens.stopRefreshingAhead()
        _ = await accounts.writes.saveUnsaved()
        gate.audit?.flush()
    }

    /// Counters since start, for `daemon.status`.
    public var counters: BrokerCounters { status.counters }

    /// What sign-ins, sign-outs and reloads may do to the tokens' state (for tests that
    /// build one of those services over this root's parts).
    var forgetting: TokenForgetting { reloading.tokens }

    /// The configuration in force.
    public var config: BrokerConfig { providers.config }
}
