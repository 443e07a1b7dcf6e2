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

/// Whether an account can mint tokens without the user.
public enum AccountState: String, Sendable {
    case ready
    /// The refresh token was refused (`invalid_grant`): only a new sign-in helps.
    case loginRequired = "login_required"
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
    /// A machine account: the client itself (client credentials grant); no refresh token,
    /// nothing stored.
    var machine: Bool = false

    /// The machine account of a client-credentials provider.
    static func machine(for p: ProviderConfig) -> Account {
        Account(key: AccountKey(provider: p.name, subject: p.clientID), issuer: p.issuer, clientID: p.clientID,
                username: nil, refreshToken: "", idToken: nil, state: .ready, machine: true)
    }
}
