import BrokerProtocol
import OAuth

/// The account's ID token as a credential that leaves the daemon: the subject token of an
/// exchange (`token.exchange` with `subject_token_type = id_token`) and the web identity
/// token of the clouds (`aws.credentials`, `account.id_token`). One that has expired, or is
/// about to, is never handed on: the account is refreshed first, in its queue, which brings
/// a new one from providers that send one with a refresh (OIDC Core §12.2); others need a
/// sign-in.
struct AccountIDTokens: Sendable {
    /// The exchange service's reach into the tokens service (`TokensForExchange`).
    let tokens: TokensForExchange
    let clock: WallClock

    /// The account's ID token with more than `minimumLife` seconds (and more than
    /// `refresh_margin`) left; `instead`, what the caller may do without one, ends the
    /// sentences of a provider that sent none or no new one.
    func live(of account: Account, provider: Provider, minimumLife: Double = 0,
              instead: String) async throws(BrokerError) -> String {
        guard let stored = tokens.account(account.key)?.idToken else {
            throw BrokerError.invalidRequest(message: "\(provider.name) gave no ID token for \(account.displayName): \(instead)")
        }
        if lives(stored, minimumLife: minimumLife) { return stored }
        try await tokens.refreshInTurn(account.key, provider: provider)
        if let renewed = tokens.account(account.key)?.idToken, lives(renewed, minimumLife: minimumLife) { return renewed }
        throw BrokerError.loginRequired(provider: provider.name, message: "the ID token of \(account.displayName) at \(provider.name) has expired, and \(provider.name) sent no new one with a refresh: run `authctl login --provider \(provider.name)` for a new one, or \(instead)")
    }

    /// The stored ID token when it lives long enough, without waiting: the cache-hit path.
    func stored(of account: Account, minimumLife: Double = 0) -> String? {
        guard let stored = tokens.account(account.key)?.idToken, lives(stored, minimumLife: minimumLife) else { return nil }
        return stored
    }

    /// Whether an ID token has more than `refresh_margin` (and `minimumLife`) left by its
    /// `exp` (one without a readable `exp` is taken as it is: the other side judges it).
    func lives(_ idToken: String, minimumLife: Double = 0) -> Bool {
        guard let exp = Self.expiry(idToken) else { return true }
        return exp - clock.now() > max(Double(tokens.refreshMargin), TokenCache.reserve, minimumLife)
    }

    /// The token's `exp`, when it has a readable one.
    static func expiry(_ idToken: String) -> Double? {
        JWT.decodeClaims(idToken)?["exp"]?.numberValue
    }
}
