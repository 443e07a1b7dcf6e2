#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BrokerCrypto
import BrokerCrypto
import OAuth
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
    /// The DPoP private key, PKCS#8 DER in base64url, and its algorithm. Items written
    /// before DPoP have neither and are read as before.
    var dpopKey: String?
    var dpopAlgorithm: String?
    /// Refresh tokens of sign-ins for one resource each, by resource, and the resource the
    /// main one was last rotated for (docs/providers.md). Older items have neither.
    var resourceRefreshTokens: [String: String]?
    var rotatedFor: String?

    enum CodingKeys: String, CodingKey {
        case version
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case username
        case loginRequired = "login_required"
        case dpopKey = "dpop_key"
        case dpopAlgorithm = "dpop_alg"
        case resourceRefreshTokens = "resource_refresh_tokens"
        case rotatedFor = "rotated_for"
    }

    static func credential(for account: Account) -> StoredCredential {
        let payload = AccountSecret(refreshToken: account.refreshToken, idToken: account.idToken, username: account.username,
                                    loginRequired: account.state == .loginRequired ? true : nil,
                                    dpopKey: (try? account.dpop?.key.pkcs8()).map(Base64URL.encode),
                                    dpopAlgorithm: account.dpop?.key.algorithm.rawValue,
                                    resourceRefreshTokens: account.resourceRefreshTokens.isEmpty ? nil : account.resourceRefreshTokens,
                                    rotatedFor: account.rotatedFor)
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
        var account = Account(
            key: AccountKey(provider: item.provider, subject: item.subject),
            issuer: item.issuer, clientID: item.clientID, username: payload.username,
            refreshToken: payload.refreshToken, idToken: payload.idToken,
            state: payload.loginRequired == true ? .loginRequired : .ready)
        account.resourceRefreshTokens = payload.resourceRefreshTokens ?? [:]
        account.rotatedFor = payload.rotatedFor
        // A key that cannot be read is dropped: a new one is made at the next refresh, and
        // a provider that bound the refresh token to the old one asks for a new sign-in.
        if let text = payload.dpopKey, let der = Base64URL.decode(text),
           let algorithm = payload.dpopAlgorithm.flatMap(JWSAlgorithm.init(rawValue:)) {
            account.dpop = (try? SigningKey(pkcs8: der, algorithm: algorithm)).flatMap { try? DPoPSigner(key: $0) }
        }
        return account
    }
}
