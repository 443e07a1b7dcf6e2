import BrokerProtocol

extension Provider {
    /// Refuses `scopes` and `params` the provider's configuration does not let callers
    /// choose (`scope_sets` or `scopes`, `any_scopes`, `caller_params`), before the provider
    /// is asked: each distinct choice is a token of its own and a request to the provider.
    nonisolated func checkCallerChoices(scopes: [String]?, params: [String: String]?) throws(BrokerError) {
        let provider = self
        if let scopes, !config.allows(scopes: scopes) {
            let allowed = config.scopeSets == nil
                ? "sets of the scopes configured there (scopes)"
                : "the sets listed in scope_sets"
            throw BrokerError.invalidRequest(message: "scopes \(CacheKey.normalized(scopes).joined(separator: " ")) may not be asked for at \(provider.name): callers may ask for \(allowed); add the set to scope_sets of [providers.\(provider.name)] in config.toml, or set any_scopes = true there")
        }
        if let params, !config.allows(paramNames: params.keys) {
            let names = params.keys.filter { !config.callerParams.contains($0) }.sorted().joined(separator: ", ")
            throw BrokerError.invalidRequest(message: "params may not set \(names) at \(provider.name): add the name to caller_params of [providers.\(provider.name)] in config.toml")
        }
    }
}
