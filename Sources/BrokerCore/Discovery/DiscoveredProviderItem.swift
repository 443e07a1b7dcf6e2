#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BrokerCrypto
import SecretStore

/// A provider found by discovery, kept in the credential store so that it survives a
/// restart with its client (the client secret and registration access token a server may
/// answer are secrets): one item per provider, told apart from accounts by its empty
/// `subject` and from stored client secrets by its payload.
enum DiscoveredProviderItem {
    private struct Payload: Codable {
        var discovered: Record
    }

    /// What is kept: enough to build the `ProviderConfig` again without asking anyone.
    private struct Record: Codable {
        var name: String
        var issuer: String
        var clientID: String
        var clientSecret: String?
        var resources: [String]
        var scopes: [String]
        var redirectPort: Int?
        var origin: DiscoveredOrigin
        /// The DPoP algorithm when the resource asked for bound tokens (RFC 9449); nil: Bearer.
        var dpop: String?

        enum CodingKeys: String, CodingKey {
            case name, issuer, resources, scopes, origin, dpop
            case clientID = "client_id"
            case clientSecret = "client_secret"
            case redirectPort = "redirect_port"
        }
    }

    static func credential(for p: ProviderConfig) -> StoredCredential? {
        guard let origin = p.discovered else { return nil }
        let record = Record(name: p.name, issuer: p.issuer, clientID: p.clientID, clientSecret: p.clientSecret,
                            resources: p.resources, scopes: p.scopes, redirectPort: p.redirectPort, origin: origin,
                            dpop: p.dpop?.rawValue)
        guard let json = try? JSONEncoder().encode(Payload(discovered: record)) else { return nil }
        return StoredCredential(provider: p.name, issuer: p.issuer, clientID: p.clientID, subject: "",
                                label: "authbroker: client at \(p.issuer) (found by discovery)", secret: String(decoding: json, as: UTF8.self))
    }

    /// The provider an item holds, or nil for any other item.
    static func provider(from item: StoredCredential) -> ProviderConfig? {
        guard item.subject.isEmpty,
              let payload = try? JSONDecoder().decode(Payload.self, from: Data(item.secret.utf8)),
              payload.discovered.name == item.provider, payload.discovered.issuer == item.issuer,
              payload.discovered.clientID == item.clientID
        else { return nil }
        let r = payload.discovered
        var config = DiscoveredProviderItem.config(name: r.name, issuer: r.issuer, clientID: r.clientID, clientSecret: r.clientSecret,
                                                   resources: r.resources, scopes: r.scopes, redirectPort: r.redirectPort, origin: r.origin)
        config.dpop = r.dpop.flatMap(JWSAlgorithm.init(rawValue:))
        return config
    }

    /// The configuration of a provider found by discovery: the resources its metadata named,
    /// any scopes (a resource's challenge may ask for more), one refresh token for all.
    static func config(name: String, issuer: String, clientID: String, clientSecret: String?, resources: [String],
                       scopes: [String], redirectPort: Int?, origin: DiscoveredOrigin) -> ProviderConfig {
        var p = ProviderConfig(name: name, issuer: issuer, clientID: clientID, clientSecret: clientSecret,
                               scopes: scopes, resources: resources)
        p.redirectPort = redirectPort
        p.anyScopes = true
        p.discovered = origin
        return p
    }
}
