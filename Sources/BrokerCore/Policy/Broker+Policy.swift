import BrokerProtocol

extension Broker {
    /// Refuses a token request the caller policy does not grant, naming the executable and
    /// the resource. Cheap enough for every request: no policy, no work.
    public func authorizeToken(_ caller: Caller?, _ request: TokenGetParams) throws(BrokerError) {
        let policy = table.withLock { $0.config.policy }  // not `config`: no copy of the whole configuration per request
        guard !policy.isOpen else { return }
        let provider = request.provider ?? provider(orDefault: nil)?.name ?? ""
        guard policy.allowsToken(caller, provider: provider, resource: request.resource) else {
            let who = caller?.description ?? "an unidentified caller"
            logger.notice("token refused by policy", metadata: ["caller": "\(who)", "provider": "\(provider)", "resource": "\(request.resource ?? "-")"])
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller?.executable ?? "this program") may not have tokens for \(request.resource ?? "the default audience") of \(provider): add an [[allow]] rule for it to config.toml")
        }
    }

    /// Refuses `account.whoami` / `account.userinfo` to callers without `claims = true`.
    public func authorizeClaims(_ caller: Caller?, _ params: AccountParams) throws(BrokerError) {
        let policy = table.withLock { $0.config.policy }
        guard !policy.isOpen else { return }
        let provider = params.provider ?? provider(orDefault: nil)?.name ?? ""
        guard policy.allowsClaims(caller, provider: provider) else {
            logger.notice("claims refused by policy", metadata: ["caller": "\(caller?.description ?? "unknown")", "provider": "\(provider)"])
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller?.executable ?? "this program") may not read the account's claims at \(provider): add claims = true to its [[allow]] rule")
        }
    }
}
