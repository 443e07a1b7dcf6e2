import BrokerProtocol

/// Refresh tokens narrowed to one resource (docs/providers.md): a provider such as Glewlwyd
/// binds a rotated refresh token to the one resource it was used for, so other resources
/// need refresh tokens of their own (`refresh_tokens = "one-per-resource"`).
extension Account {
    /// The refresh-token chain a request for `resource` uses: the resource's own, when the
    /// provider keeps one per resource and the account signed in for it; nil = the main one.
    func chain(for resource: String?, rule: RefreshTokenRule) -> String? {
        guard rule == .onePerResource, let resource, resourceRefreshTokens[resource] != nil else { return nil }
        return resource
    }

    func refreshToken(of chain: String?) -> String {
        chain.flatMap { resourceRefreshTokens[$0] } ?? refreshToken
    }
}

extension Broker {
    /// The sentence for `invalid_target`: what is true about this resource and this account.
    func invalidTarget(_ resource: String?, account: Account, chain: String?, provider: Provider) -> BrokerError {
        let name = provider.name
        let what = resource ?? "the default audience"
        let message: String
        if let resource, provider.config.resources.contains(resource) {
            let perResource = "`authctl login --provider \(name) --resource \(resource)`"
            if chain == nil, let narrowed = account.rotatedFor, narrowed != resource {
                // Signing in again gives a new refresh token that narrows the same way.
                let to = narrowed.isEmpty ? "the default audience" : narrowed
                let fix = provider.config.refreshTokens == .onePerResource
                    ? "sign in once for this resource with \(perResource)"
                    : "set refresh_tokens = \"one-per-resource\" under [providers.\(name)] in config.toml, restart authbrokerd and run \(perResource) (docs/providers.md)"
                message = "\(name) narrowed this account's refresh token to \(to) when it rotated it, so it no longer grants \(resource); signing in again would narrow the new one the same way: \(fix)"
            } else if chain != nil {
                message = "\(name) no longer grants \(resource) to the sign-in made for it: run \(perResource)"
            } else {
                message = "\(name) does not grant \(resource) to this sign-in: run `authctl login --provider \(name)` so the sign-in asks for it"
            }
        } else {
            message = "\(name) does not grant tokens for \(what) to this sign-in: add it to resources in config.toml and run `authctl login --provider \(name)`"
        }
        return BrokerError.providerError(provider: name, oauthError: "invalid_target", message: message)
    }

    /// A resource's own refresh token was refused (`invalid_grant`): only that resource
    /// needs a new sign-in; the account and its other refresh tokens stay.
    func dropChain(_ chain: String, of account: Account, provider: Provider) async -> BrokerError {
        accounts.update(account.key) { $0.resourceRefreshTokens[chain] = nil }
        cache.removeAll(for: account.key)
        if let changed = accounts[account.key] { try? await store.save(AccountSecret.credential(for: changed)) }
        logger.warning("a resource's refresh token was refused: sign-in for it required",
                       metadata: ["account": "\(account.key)", "resource": "\(chain)"])
        events.emit(BrokerEvent(kind: .loginRequired, provider: provider.name, account: account.displayName,
                                subject: account.key.subject, resource: chain))
        return BrokerError.loginRequired(
            provider: provider.name,
            message: "the sign-in of \(account.displayName) at \(provider.name) for \(chain) is no longer valid: run `authctl login --provider \(provider.name) --resource \(chain)`")
    }
}
