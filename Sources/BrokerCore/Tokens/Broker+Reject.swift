import BrokerProtocol

/// `token.reject`: a caller says an API refused a token, so it is not served again.
extension Broker {
    /// A caller may reject only what it may get: the token's (or key's) provider and
    /// resource must be granted to it by the `[[allow]]` rules, as for `token.get`.
    /// Otherwise one program could make the broker refresh another's tokens at will.
    public func authorizeReject(_ identify: CallerIdentification, _ params: TokenRejectParams) throws(BrokerError) {
        if let token = params.accessToken {
            // A token that is not cached has nothing to drop and nothing to guard.
            guard let key = cache.key(holding: token) else { return }
            try authorizeToken(identify, TokenGetParams(resource: key.resource, provider: key.account.provider))
        } else {
            try authorizeToken(identify, TokenGetParams(resource: params.resource, provider: params.provider))
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
