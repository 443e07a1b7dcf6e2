import BrokerProtocol
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

extension ReloadSummary {
    /// The providers `new` adds, changes and removes compared with `old`.
    init(from old: BrokerConfig, to new: BrokerConfig) {
        let oldConfigs = Dictionary(old.providers.map { ($0.name, $0) }) { first, _ in first }
        for p in new.providers {
            if let before = oldConfigs[p.name] {
                if before != p { changed.append(p.name) }
            } else {
                added.append(p.name)
            }
        }
        removed = old.providers.map(\.name).filter { new.provider(named: $0) == nil }
    }
}
