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
        return try ProviderMetadata.checked(response.body, place: place, issuer: issuer)
    }

    /// Fetches and checks the configured issuer's metadata as `ResourceDiscovery` does for a
    /// server found through a resource: RFC 8414 first, then OpenID Connect discovery, for
    /// servers that publish only the former. The same checks as `discover()`.
    public func discoverAuthorizationServer() async throws(OAuthError) -> ProviderMetadata {
        try await ResourceDiscovery(transport: transport).authorizationServerMetadata(issuer: configuration.issuer).value
    }
}
