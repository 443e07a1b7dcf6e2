import BrokerProtocol

extension Broker {
    /// Refuses `scopes` and `params` the provider's configuration does not let callers
    /// choose (`scope_sets` or `scopes`, `any_scopes`, `caller_params`), before the provider
    /// is asked: each distinct choice is a token of its own and a request to the provider.
    func checkCallerChoices(scopes: [String]?, params: [String: String]?, provider: Provider) throws(BrokerError) {
        let config = provider.config
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

    /// Refuses a new token for `key` when the account holds `max_tokens_per_account` live
    /// tokens of other keys already: every distinct resource, scope set, params and exchange
    /// target is one, and each costs a request to the provider. Called in the account's
    /// queue, so concurrent requests cannot overshoot it.
    func checkRoom(for key: CacheKey, provider: Provider, account: Account) throws(BrokerError) {
        let limit = provider.config.maxTokensPerAccount
        guard !cache.hasRoom(for: key, limit: limit, now: clock.now()) else { return }
        logger.notice("token refused: the account holds its maximum of distinct tokens", metadata: ["account": "\(account.key)", "limit": "\(limit)"])
        throw BrokerError.overloaded(message: "\(account.displayName) at \(provider.name) holds \(limit) live tokens for other resources, scopes and params already (max_tokens_per_account of [providers.\(provider.name)]): ask for one of those, or again when they expire")
    }

    /// `[daemon] cache_misses_per_minute`: requests one connection may make that the cache
    /// cannot answer (0: no limit). Read on each miss, so a reload applies at once.
    public var cacheMissesPerMinute: Int { table.withLock { $0.config.daemon.cacheMissesPerMinute } }
}
