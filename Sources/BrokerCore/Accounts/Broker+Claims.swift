import BrokerProtocol
import OAuth

/// `account.whoami` and `account.userinfo`: who the signed-in account is.
extension Broker {
    /// The claims of the account's ID token, verified when it was received.
    public func whoami(_ params: AccountParams) throws(BrokerError) -> ClaimsResult {
        let provider = try provider(params.provider)
        let account = try account(of: provider.name, named: params.account)
        guard let idToken = account.idToken, let claims = JWT.decodeClaims(idToken) else {
            throw BrokerError.invalidRequest(message: "\(provider.name) has no ID token for \(account.username ?? account.key.subject)\(account.machine ? ": it is a machine account" : "")")
        }
        return ClaimsResult(provider: provider.name, subject: account.key.subject, claims: claims.mapValues(\.claimValue))
    }

    /// The provider's UserInfo answer, fetched with a fresh access token for the account.
    public func userinfo(_ params: AccountParams) async throws(BrokerError) -> ClaimsResult {
        let provider = try provider(params.provider)
        let account = try account(of: provider.name, named: params.account)
        guard !account.machine else {
            throw BrokerError.invalidRequest(message: "\(provider.name) is a machine account: it has no user info")
        }
        let token = try await token(TokenGetParams(provider: provider.name, account: account.key.subject))
        let metadata = try await provider.discovered()
        do {
            let claims = try await provider.client.userinfo(metadata, accessToken: token.accessToken, subject: account.key.subject)
            return ClaimsResult(provider: provider.name, subject: account.key.subject, claims: claims.mapValues(\.claimValue))
        } catch {
            counters.providerErrors.increment()
            throw await provider.failed(error, doing: "userinfo request")
        }
    }
}

extension JSONValue {
    /// The same value in the protocol's type.
    var claimValue: ClaimValue {
        switch self {
        case .string(let s): return .string(s)
        case .number(let n): return .number(n)
        case .bool(let b): return .bool(b)
        case .null: return .null
        case .array(let a): return .array(a.map(\.claimValue))
        case .object(let o): return .object(o.mapValues(\.claimValue))
        }
    }
}
