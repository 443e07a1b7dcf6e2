import BrokerProtocol

/// What the proofs service may use of the others: the token `token.get` gives (at once or
/// refreshed), the provider a request names (whether it uses DPoP) and the account (its
/// DPoP key). Built by the composition root, so `dpop.proof` reads these and can change
/// nothing.
struct TokensForProofs: Sendable {
    private let tokens: TokensService
    private let accounts: AccountsService
    private let providers: ProvidersService

    init(tokens: TokensService, accounts: AccountsService, providers: ProvidersService) {
        self.tokens = tokens
        self.accounts = accounts
        self.providers = providers
    }

    /// `TokensService.token`: the token `token.get` would give.
    func token(_ request: TokenGetParams) async throws(BrokerError) -> TokenGetResult { try await tokens.token(request) }

    /// `TokensService.cachedToken`: the cache hit `token.get` would answer at once, or nil.
    func cachedToken(_ request: TokenGetParams) -> TokenGetResult? { tokens.cachedToken(request) }

    /// The provider named (or the default) that serves `resource`, if one is known now.
    func knownProvider(_ name: String?, resource: String?) -> Provider? {
        providers.provider(orDefault: name, resource: resource)
    }

    /// `ProvidersService.provider`: the provider, or the sentence naming what is missing.
    func provider(_ name: String?, resource: String?) throws(BrokerError) -> Provider {
        try providers.provider(name, resource: resource)
    }

    /// `AccountsService.resolved`.
    func resolved(provider name: String?, account: String?) throws(BrokerError) -> (Provider, Account) {
        try accounts.resolved(provider: name, account: account)
    }

    /// `AccountsService.resolve`, for the cache-hit path.
    func resolve(provider name: String?, account: String?, resource: String?) -> AccountsService.Resolution {
        accounts.resolve(provider: name, account: account, resource: resource)
    }
}
