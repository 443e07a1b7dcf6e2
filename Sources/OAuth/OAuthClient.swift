#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Talks OAuth 2.0 / OpenID Connect to one provider: discovery, device authorization,
/// token grants and revocation. Holds no state; every call is one exchange.
///
/// Confidential clients authenticate with `client_secret_basic` unless the provider lists
/// `client_secret_post` and not `client_secret_basic`; public clients send `client_id`.
public struct OAuthClient: Sendable {
    /// Who this client is at the provider.
    public let configuration: ClientConfiguration
    /// How requests travel; `NetworkTransport` in the daemon, a stub in tests.
    public let transport: any HTTPTransport

    /// Makes a client for `configuration` that sends through `transport`.
    public init(configuration: ClientConfiguration, transport: any HTTPTransport) {
        self.configuration = configuration
        self.transport = transport
    }

    /// Fetches and checks the provider's discovery document (OpenID Connect Discovery 1.0
    /// §4): the configured issuer must be https (or http on loopback), the document must
    /// name exactly the configured issuer (§4.3), and every endpoint must follow the same
    /// https rule. Redirects are not followed.
    public func discover() async throws(OAuthError) -> ProviderMetadata {
        let issuer = configuration.issuer
        try EndpointPolicy.checkIssuer(issuer, what: "issuer")
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let url = base + "/.well-known/openid-configuration"
        let response = try await transport.send(HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"]))
        let place = "the provider's discovery document at \(EndpointPolicy.describe(url))"
        guard response.status == 200 else {
            if response.status == 429 || response.status == 503 {
                throw .busy("\(place) answered HTTP \(response.status)\(ProviderAnswer.statusHint(response.status))",
                            retryAfter: RetryAfter(response: response))
            }
            throw .invalidResponse("\(place) answered HTTP \(response.status)\(ProviderAnswer.statusHint(response.status))")
        }
        let metadata: ProviderMetadata
        do {
            metadata = try JSONDecoder().decode(ProviderMetadata.self, from: Data(response.body))
        } catch let DecodingError.keyNotFound(key, _) {
            throw .invalidResponse("\(place) has no \(key.stringValue)")
        } catch let DecodingError.valueNotFound(_, context) where context.codingPath.count == 1 {
            throw .invalidResponse("\(place) has no \(context.codingPath[0].stringValue)")
        } catch let DecodingError.typeMismatch(_, context) where !context.codingPath.isEmpty {
            throw .invalidResponse(ProviderMetadata.wrongType(context.codingPath[0].stringValue, in: place))
        } catch let DecodingError.valueNotFound(_, context) where !context.codingPath.isEmpty {
            throw .invalidResponse(ProviderMetadata.wrongType(context.codingPath[0].stringValue, in: place))
        } catch {
            throw .invalidResponse("\(place) is not a valid discovery document")
        }
        guard metadata.issuer == issuer else {
            throw .configuration("\(place) names the issuer \(EndpointPolicy.describe(metadata.issuer)), not \(EndpointPolicy.describe(issuer)) as configured; they must be identical")
        }
        for (name, endpoint) in metadata.endpoints {
            try EndpointPolicy.check(endpoint, what: "the provider's \(name)")
        }
        return metadata
    }
}

extension ProviderMetadata {
    /// The sentence for a member of the wrong type: which one, and what it must be, for the
    /// user to pass on to the provider's administrators.
    static func wrongType(_ member: String, in place: String) -> String {
        let expected: String
        if member == CodingKeys.authorizationResponseIssParameterSupported.rawValue {
            expected = "true or false"
        } else {
            expected = member.hasSuffix("_supported") ? "a list of strings" : "a string"
        }
        return "\(place) is not a valid discovery document: its \(member) is not \(expected) (RFC 8414 §2); the provider's administrators must correct it"
    }

    /// Every endpoint URL the document gives, with its member name.
    var endpoints: [(String, String)] {
        let all: [(String, String?)] = [
            ("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint),
            ("device_authorization_endpoint", deviceAuthorizationEndpoint), ("revocation_endpoint", revocationEndpoint),
            ("userinfo_endpoint", userinfoEndpoint), ("jwks_uri", jwksURI), ("end_session_endpoint", endSessionEndpoint),
            ("introspection_endpoint", introspectionEndpoint),
            ("authorization_challenge_endpoint", authorizationChallengeEndpoint),
        ]
        return all.compactMap { name, url in url.map { (name, $0) } }
    }
}
