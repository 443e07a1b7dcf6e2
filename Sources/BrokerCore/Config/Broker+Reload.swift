import OAuth
import SecretStore

/// The configuration and the run-time providers built from it.
struct ProviderTable: Sendable {
    var config: BrokerConfig
    var providers: [String: Provider]
    /// Client secrets kept in the Secret Service (`authctl set-secret`), by provider name;
    /// used where the configuration has none.
    var storedSecrets: [String: String]

    /// Builds the providers of `config`, keeping those whose configuration did not change
    /// (with their discovery document and back-off).
    init(config: BrokerConfig, storedSecrets: [String: String] = [:], keeping old: [String: Provider],
         transport: any HTTPTransport, clock: WallClock, events: EventHub) {
        self.config = config
        self.storedSecrets = storedSecrets
        var providers: [String: Provider] = [:]
        for var p in config.providers {
            if p.clientSecret == nil { p.clientSecret = storedSecrets[p.name] }
            if let kept = old[p.name], kept.config == p {
                providers[p.name] = kept
            } else {
                providers[p.name] = Provider(config: p, transport: transport, clock: clock, events: events)
            }
        }
        self.providers = providers
    }
}

/// What a reload changed, for the log.
public struct ReloadSummary: Sendable, Equatable {
    public var added: [String] = []
    public var changed: [String] = []
    public var removed: [String] = []
}

extension Broker {
    /// Puts a new configuration in force (SIGHUP). Unchanged providers keep their state and
    /// their accounts' cached tokens; accounts of removed or changed providers are dropped
    /// from memory (their Secret Service items stay) and the store is read again for the
    /// providers now configured. The store kind cannot change without a restart.
    public func reload(_ new: BrokerConfig) async throws(BrokerError) -> ReloadSummary {
        guard new.daemon.store == config.daemon.store else {
            throw BrokerError.invalidRequest(message: "daemon.store cannot change while the daemon runs: restart it (`systemctl --user restart authbroker.service`)")
        }
        let summary = table.withLock { table -> ReloadSummary in
            var summary = ReloadSummary()
            let oldConfigs = Dictionary(uniqueKeysWithValues: table.config.providers.map { ($0.name, $0) })
            for p in new.providers {
                if let old = oldConfigs[p.name] {
                    if old != p { summary.changed.append(p.name) }
                } else {
                    summary.added.append(p.name)
                }
            }
            summary.removed = table.config.providers.map(\.name).filter { new.provider(named: $0) == nil }
            table = ProviderTable(config: new, storedSecrets: table.storedSecrets, keeping: table.providers, transport: transport, clock: clock, events: events)
            return summary
        }
        // Restarted by the next requests, under the new configuration.
        stopRefreshingAhead()
        for account in accounts.list() where summary.removed.contains(account.key.provider) || summary.changed.contains(account.key.provider) {
            forget(account.key)
        }
        if !summary.added.isEmpty || !summary.changed.isEmpty {
            try await start()
        }
        logger.notice("configuration reloaded", metadata: [
            "added": "\(summary.added.joined(separator: ","))",
            "changed": "\(summary.changed.joined(separator: ","))",
            "removed": "\(summary.removed.joined(separator: ","))",
        ])
        return summary
    }
}
