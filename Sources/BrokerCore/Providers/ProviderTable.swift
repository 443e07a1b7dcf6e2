import BrokerProtocol
import OAuth
import SecretStore

/// The configuration and the run-time providers built from it.
struct ProviderTable: Sendable {
    /// The configuration in force: config.toml's providers, with the resources discovery
    /// found for them, and the providers discovery found (`ProviderConfig.discovered`).
    var config: BrokerConfig
    /// config.toml's part alone, as last read.
    var file: BrokerConfig
    var providers: [String: Provider]
    /// Client secrets kept in the Secret Service (`authctl set-secret`), by provider name;
    /// used where the configuration has none.
    var storedSecrets: [String: String]
    /// What discovery added, kept across reloads (a reload replaces config.toml's part only).
    var found: DiscoveredProviders
    /// The provider a resource names when a request names none: discovered resources only,
    /// each of one provider (`provider(orDefault:resource:)`, read on every cache hit).
    var byResource: [String: String]

    /// Builds the providers of `file` and of `found`, keeping those whose configuration did
    /// not change (with their discovery document and back-off).
    init(config file: BrokerConfig, found: DiscoveredProviders = DiscoveredProviders(), storedSecrets: [String: String] = [:],
         keeping old: [String: Provider], transport: any HTTPTransport, clock: WallClock, events: EventHub) {
        let config = found.applied(to: file)
        self.config = config
        self.file = file
        self.found = found
        self.byResource = found.index(in: config)
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
