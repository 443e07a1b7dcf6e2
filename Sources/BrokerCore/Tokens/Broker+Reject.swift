import BrokerProtocol

/// `token.reject`: a caller says an API refused a token, so it is not served again.
extension Broker {
    /// A caller may reject only what it may get: the token's (or key's) provider, resource,
    /// scopes, params and exchange audience must be granted to it by the `[[allow]]` rules,
    /// as for `token.get` and `token.exchange`. Otherwise one program could make the broker
    /// refresh another's tokens at will.
    public func authorizeReject(_ identify: CallerIdentification, _ params: TokenRejectParams) throws(BrokerError) {
        let policy = callerPolicy
        guard !policy.isOpen else { return }
        if let token = params.accessToken {
            // A token that is not cached has nothing to drop and nothing to guard.
            guard let key = cache.key(holding: token) else { return }
            let caller = try identify(policy.needsCgroup)
            // An exchanged token is for its resource and its audience (one of them may be
            // absent); any other for its resource, nil being the default audience.
            var targets: [String?] = [key.resource]
            if let exchange = key.exchange {
                let named: [String] = [key.resource, exchange.audience].compactMap { $0 }
                targets = named
            }
            try authorize(caller, policy: policy, provider: key.account.provider, targets: targets,
                          scopes: key.scopes, params: Array(key.params.keys))
        } else {
            let caller = try identify(policy.needsCgroup)
            try authorize(caller, policy: policy, provider: params.provider, targets: [params.resource],
                          scopes: params.scopes ?? [], params: [])
        }
    }

    /// Drops the rejected token from the cache: the next `token.get` for its key refreshes.
    public func rejectToken(_ params: TokenRejectParams) throws(BrokerError) -> TokenRejectResult {
        let key: CacheKey
        if let token = params.accessToken {
            guard params.resource == nil, params.scopes == nil, params.provider == nil, params.account == nil else {
                throw BrokerError.invalidRequest(message: "give either access_token or the token's provider, account, resource and scopes, not both")
            }
            guard let found = cache.key(holding: token) else { return TokenRejectResult(dropped: false) }
            key = found
            guard cache.remove(found, ifHolding: token) else { return TokenRejectResult(dropped: false) }
        } else {
            let (_, account) = try resolved(provider: params.provider, account: params.account)
            key = CacheKey(account: account.key, resource: params.resource, scopes: params.scopes ?? [])
            guard cache.remove(key) else { return TokenRejectResult(dropped: false) }
        }
        logger.notice("a caller rejected a cached token; the next request refreshes it",
                      metadata: ["account": "\(key.account)", "resource": "\(key.resource ?? "-")"])
        return TokenRejectResult(dropped: true)
    }
}
