/// What resource-first discovery added to the configuration: providers nobody configured
/// (trusted, with a client) and resources found for configured providers. A reload keeps
/// it; `ProviderTable` lays it over config.toml's providers.
struct DiscoveredProviders: Sendable, Equatable {
    /// Providers found by discovery, by name (each with `discovered` set).
    var providers: [String: ProviderConfig] = [:]
    /// Resources whose metadata named a configured provider's issuer, by provider name.
    var resources: [String: [String]] = [:]

    /// `file` with the discovered resources added to its providers (those the metadata
    /// named: the provider's configuration still decides everything else) and the
    /// discovered providers whose names config.toml does not use.
    func applied(to file: BrokerConfig) -> BrokerConfig {
        var config = file
        config.providers = file.providers.map { p in
            var p = p
            for r in resources[p.name] ?? [] where !p.resources.contains(r) { p.resources.append(r) }
            return p
        }
        let taken = Set(file.providers.map(\.name))
        config.providers += providers.values.filter { !taken.contains($0.name) }
        config.providers.sort { $0.name < $1.name }
        return config
    }

    /// Resource → provider for the resources discovery found, in `config`: a request that
    /// names only such a resource goes to its provider.
    func index(in config: BrokerConfig) -> [String: String] {
        var index: [String: String] = [:]
        for p in config.providers {
            let found = p.discovered != nil ? p.resources : (resources[p.name] ?? [])
            for r in found where index[r] == nil { index[r] = p.name }
        }
        return index
    }

    /// The discovered provider whose issuer is `issuer`, if any.
    func provider(issuer: String) -> ProviderConfig? {
        providers.values.sorted { $0.name < $1.name }.first { $0.issuer == issuer }
    }
}
