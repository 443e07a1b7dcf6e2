import BrokerProtocol
import OAuth

/// The claims service: `account.whoami` (the claims of the account's ID token, verified
/// when it was received) and `account.userinfo` (the provider's UserInfo answer, fetched
/// with a fresh access token).
///
/// Owns no state. Depends on the accounts, and the tokens service for userinfo's token.
public final class ClaimsService: RegistersMethods, Sendable {
    private let accounts: AccountsService
    private let tokens: TokensService
    private let counters: BrokerCounters
    private let clock: WallClock

    init(accounts: AccountsService, tokens: TokensService, counters: BrokerCounters, clock: WallClock) {
        self.accounts = accounts
        self.tokens = tokens
        self.counters = counters
        self.clock = clock
    }

    /// The claims of the account's ID token, verified when it was received.
    public func whoami(_ params: AccountParams) throws(BrokerError) -> ClaimsResult {
        let (provider, account, choice) = try accounts.chosen(
            provider: params.provider, account: params.account,
            context: AccountContext(hint: params.accountHint, home: CallerDirectory.home))
        guard let idToken = account.idToken, let claims = JWT.decodeClaims(idToken) else {
            let why = account.machine ? ": it is a machine account" : ": the provider sent none at sign-in; `authctl userinfo` asks the provider instead"
            throw BrokerError.invalidRequest(message: "\(provider.name) has no ID token for \(account.displayName)\(why)")
        }
        return ClaimsResult(provider: provider.name, subject: account.key.subject, claims: claims, chosenBy: choice.label)
    }

    /// The provider's UserInfo answer, fetched with a fresh access token for the account.
    public func userinfo(_ params: AccountParams) async throws(BrokerError) -> ClaimsResult {
        let (provider, account) = try accounts.resolved(provider: params.provider, account: params.account)
        guard !account.machine else {
            throw BrokerError.invalidRequest(message: "\(provider.name) is a machine account: it has no user info")
        }
        let token = try await tokens.token(TokenGetParams(provider: provider.name, account: account.key.subject))
        let metadata = try await provider.discovered()
        // Read again after the token: a refresh may just have given the account its DPoP key.
        let (_, current) = try accounts.resolved(provider: provider.name, account: account.key.subject)
        let client = provider.client(provider.signer(of: current), metadata: metadata, clock: clock)
        do {
            let claims = try await client.userinfo(metadata, accessToken: token.accessToken, subject: account.key.subject,
                                                   tokenType: token.tokenType)
            return ClaimsResult(provider: provider.name, subject: account.key.subject, claims: claims)
        } catch {
            counters.providerErrors.increment()
            if case .provider("invalid_token", _, _) = error {
                // The token was asked without `resource`, yet the provider still refused it:
                // its userinfo endpoint checks the audience, and this grant gives no token
                // meant for it.
                let why = provider.config.resources.isEmpty ? "" : ", although authbroker asked for it without a resource (the grant still restricts it to the configured resources)"
                throw BrokerError.providerError(provider: provider.name, oauthError: "invalid_token", message: "\(provider.name)'s userinfo endpoint refused the access token of \(account.displayName)\(why), so its user info cannot be shown; `authctl whoami` shows the claims of the ID token instead")
            }
            throw await provider.failed(error, doing: "userinfo request")
        }
    }

    public func register(into registrar: inout some MethodRegistrar) {
        let claims: Access<AccountParams> = .checked("the account's claims: a rule with claims = true for the provider") { p in
            .claims(provider: p.provider)
        }
        registrar.add(MethodSpec(
            .accountWhoami, empty: AccountParams(), access: claims,
            answer: .later { p throws(BrokerError) in try self.whoami(p) }))
        registrar.add(MethodSpec(
            .accountUserinfo, empty: AccountParams(), access: claims,
            answer: .later { p throws(BrokerError) in try await self.userinfo(p) }))
    }
}
