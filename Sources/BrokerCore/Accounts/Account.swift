import SecretStore
import BrokerProtocol
import OAuth

/// Identifies an account: the provider's configured name and the `sub` claim.
public struct AccountKey: Hashable, Sendable, CustomStringConvertible {
    public var provider: String
    public var subject: String

    public init(provider: String, subject: String) {
        self.provider = provider
        self.subject = subject
    }

    public var description: String { "\(provider)/\(subject)" }
}

/// A signed-in account. Holds the refresh token in memory; the Secret Service holds the
/// durable copy.
struct Account: Sendable {
    var key: AccountKey
    var issuer: String
    var clientID: String
    var username: String?
    var refreshToken: String
    var idToken: String?
    var state: AccountState
    /// True when the newest refresh token could not be written to the store yet.
    var unsaved: Bool = false
    /// Why the store refused it, the last time it was tried.
    var unsavedBecause: StoreError? = nil
    /// A machine account: the client itself (client credentials grant); no refresh token,
    /// nothing stored.
    var machine: Bool = false
    /// The account's DPoP key (docs/dpop.md): stored beside the refresh token, which the
    /// provider may have bound to it; never handed out.
    var dpop: DPoPSigner? = nil
    /// `refresh_tokens = "one-per-resource"`: the refresh tokens of sign-ins made for one
    /// resource each (`authctl login --resource`), by resource; `refreshToken` serves the rest.
    var resourceRefreshTokens: [String: String] = [:]
    /// The resource `refreshToken` was last rotated for ("" = the default audience): how a
    /// provider that narrows rotated refresh tokens (Glewlwyd) is recognised.
    var rotatedFor: String? = nil

    /// What people are shown and may type: the username, else `subject@issuer-host`.
    var displayName: String {
        if let username, !username.isEmpty { return username }
        if machine { return key.subject }
        return "\(key.subject)@\(Account.host(of: issuer))"
    }

    /// True when `name` is this account's subject, username or display name.
    func isNamed(_ name: String) -> Bool {
        key.subject == name || username == name || displayName == name
    }

    /// Whether the account is one of `provider`'s as configured: the same issuer and client,
    /// and a machine account exactly when the provider uses the client credentials grant
    /// (what a reload keeps, and what a sign-in that finished after one may still store).
    func belongs(to provider: ProviderConfig) -> Bool {
        provider.issuer == issuer && provider.clientID == clientID && machine == (provider.grant == .clientCredentials)
    }

    /// The issuer's host without scheme, port, path or brackets: "login.example.com".
    static func host(of issuer: String) -> String {
        var rest = Substring(issuer)
        if let scheme = rest.firstRange(of: "://") { rest = rest[scheme.upperBound...] }
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            return String(rest[rest.index(after: rest.startIndex)..<close])
        }
        if let colon = rest.firstIndex(of: ":") { rest = rest[..<colon] }
        return rest.isEmpty ? "provider" : String(rest)
    }

    /// The machine account of a client-credentials provider.
    static func machine(for p: ProviderConfig) -> Account {
        Account(key: AccountKey(provider: p.name, subject: p.clientID), issuer: p.issuer, clientID: p.clientID,
                username: nil, refreshToken: "", idToken: nil, state: .ready, machine: true)
    }
}
