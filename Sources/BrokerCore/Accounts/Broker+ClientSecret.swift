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

extension Broker {
    /// Stores a provider's client secret in the Secret Service and puts it in force at once.
    /// A secret in config.toml takes precedence and makes this an error, so there is never
    /// doubt about which one is used.
    public func setClientSecret(_ params: SetSecretParams) async throws(BrokerError) -> SetSecretResult {
        let provider = try provider(params.provider)
        guard provider.config.clientSecret == nil || table.withLock({ $0.storedSecrets[provider.name] }) != nil else {
            throw BrokerError.invalidRequest(message: "\(provider.name) has client_secret in config.toml: remove it there first, so the file holds no secret")
        }
        // Trimmed with the standard library alone: BrokerCore does not import Foundation.
        let leading = params.clientSecret.drop(while: \.isWhitespace)
        let secret = String(leading.dropLast(leading.reversed().prefix(while: \.isWhitespace).count))
        guard !secret.isEmpty, secret.count <= 4096 else {
            throw BrokerError.invalidRequest(message: "the client secret must be between 1 and 4096 characters")
        }
        guard let config = config.provider(named: provider.name) else { throw BrokerError.notSignedIn(provider.name) }
        do {
            try await store.save(ClientSecretItem.credential(for: config, secret: secret))
        } catch {
            throw BrokerError.storeUnavailable(message: "the client secret could not be stored: \(error.message)", reason: error.reason)
        }
        var secrets = table.withLock { $0.storedSecrets }
        secrets[provider.name] = secret
        useStoredSecrets(secrets)
        logger.notice("client secret stored", metadata: ["provider": "\(provider.name)"])
        return SetSecretResult(provider: provider.name, stored: true)
    }

    func useStoredSecrets(_ secrets: [String: String]) {
        table.withLock { t in
            t = ProviderTable(config: t.config, storedSecrets: secrets, keeping: t.providers, transport: transport, clock: clock, events: events)
        }
    }
}
