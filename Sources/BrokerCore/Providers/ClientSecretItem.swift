#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BrokerProtocol
import SecretStore

/// A confidential client's secret kept in the Secret Service rather than in config.toml:
/// one item per provider, told apart from accounts by its empty `subject`.
enum ClientSecretItem {
    private struct Payload: Codable {
        var clientSecret: String
        enum CodingKeys: String, CodingKey { case clientSecret = "client_secret" }
    }

    static func credential(for p: ProviderConfig, secret: String) -> StoredCredential {
        let json = (try? JSONEncoder().encode(Payload(clientSecret: secret))).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return StoredCredential(provider: p.name, issuer: p.issuer, clientID: p.clientID, subject: "",
                                label: "authbroker: client secret of \(p.name)", secret: json)
    }

    static func secret(from item: StoredCredential) -> String? {
        guard item.subject.isEmpty,
              let payload = try? JSONDecoder().decode(Payload.self, from: Data(item.secret.utf8)),
              !payload.clientSecret.isEmpty
        else { return nil }
        return payload.clientSecret
    }
}
