#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol

/// The status service: `daemon.status`, what the daemon serves and how it is, never a
/// token's value. Under `[[allow]]` rules a caller sees only the cached tokens it may get
/// itself (which resources other programs use, and when, is theirs to know).
///
/// Owns: when the daemon started. Reads the providers, the accounts, the token cache's
/// entries and the counters through `StatusReadings`, which the composition root builds.
public final class StatusService: RegistersMethods, Sendable {
    private let readings: StatusReadings
    /// The caller policy, which decides what a caller may see; the root hands it to the server.
    let gate: CallerGate
    private let socketPath: String
    private let startedAt: Double
    private let clock: WallClock

    init(readings: StatusReadings, gate: CallerGate, socketPath: String, clock: WallClock) {
        self.readings = readings
        self.gate = gate
        self.socketPath = socketPath
        self.clock = clock
        self.startedAt = clock.boottime()
    }

    /// The daemon's counters, which `daemon.status` shows (the root hands them to the server).
    var counters: BrokerCounters { readings.counters }

    public func status() -> DaemonStatusResult {
        status(showing: { _, _ in true })
    }

    /// The status as the caller `identify` names may see it: under `[[allow]]` rules, only
    /// the cached tokens it may get itself (under a `confirm = true` rule, those the user
    /// allowed on its connection: `answers`). A caller that cannot be identified sees no
    /// cached token.
    public func status(for identify: CallerIdentification, answers: ConfirmAnswers? = nil) -> DaemonStatusResult {
        guard !gate.policy.isOpen else { return status() }
        let caller = gate.caller(identify)
        return status { provider, resource in gate.shows(caller, provider: provider, resource: resource, answers: answers) }
    }

    private func status(showing shown: (_ provider: String, _ resource: String?) -> Bool) -> DaemonStatusResult {
        let reading = clock.reading()
        let providerStatus = readings.providerConfigs.map { p in
            ProviderStatus(
                name: p.name, issuer: p.issuer, clientID: p.clientID,
                accounts: readings.accounts(of: p.name).map { a in
                    AccountStatus(account: a.info, tokens: readings.cachedEntries(for: a.key, now: reading).filter { shown(p.name, $0.key.resource) }.map {
                        CachedTokenInfo(resource: $0.key.resource, scopes: $0.key.scopes, expiresAt: Int64($0.token.expiresAt(at: reading)))
                    })
                })
        }
        let failure = readings.storeFailure
        return DaemonStatusResult(
            version: BrokerVersion.current, pid: Int32(getpid()), uptimeSeconds: (reading.boot - startedAt),
            store: readings.storeKind, socket: socketPath, providers: providerStatus, counters: readings.counters.snapshot(),
            storeUnavailable: failure.map { StoreUnavailableStatus(reason: $0.reason, message: $0.message) },
            reloadRefused: readings.reloadRefusal)
    }

    public func register(into registrar: inout some MethodRegistrar) {
        // What it shows depends on the caller under rules.
        registrar.add(MethodSpec(
            .daemonStatus, empty: NoParams(),
            access: .open("shows providers, accounts and counters, never a token's value; under [[allow]] rules a caller sees only the cached tokens the policy would grant it (CallerGate.shows)"),
            answer: .nowFor { identify, answers, _ in self.status(for: identify, answers: answers) }))
    }
}
