#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SecretStore

/// The payload of one Secret Service item: a small JSON document the store never reads.
struct AccountSecret: Codable, Sendable {
    var version = 1
    var refreshToken: String
    var idToken: String?
    var username: String?
    /// Set once the provider refused the refresh token, so a restart does not show the
    /// account as ready.
    var loginRequired: Bool?

    enum CodingKeys: String, CodingKey {
        case version
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case username
        case loginRequired = "login_required"
    }

    static func credential(for account: Account) -> StoredCredential {
        let payload = AccountSecret(refreshToken: account.refreshToken, idToken: account.idToken, username: account.username,
                                    loginRequired: account.state == .loginRequired ? true : nil)
        let json = (try? JSONEncoder().encode(payload)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let who = account.displayName
        return StoredCredential(
            provider: account.key.provider, issuer: account.issuer, clientID: account.clientID,
            subject: account.key.subject, label: "authbroker: \(account.key.provider) (\(who))", secret: json)
    }

    /// The account a stored item describes, or nil when the payload is not ours.
    static func account(from item: StoredCredential) -> Account? {
        guard let payload = try? JSONDecoder().decode(AccountSecret.self, from: Data(item.secret.utf8)),
              !payload.refreshToken.isEmpty
        else { return nil }
        return Account(
            key: AccountKey(provider: item.provider, subject: item.subject),
            issuer: item.issuer, clientID: item.clientID, username: payload.username,
            refreshToken: payload.refreshToken, idToken: payload.idToken,
            state: payload.loginRequired == true ? .loginRequired : .ready)
    }
}
