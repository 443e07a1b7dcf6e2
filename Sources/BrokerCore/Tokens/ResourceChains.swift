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
