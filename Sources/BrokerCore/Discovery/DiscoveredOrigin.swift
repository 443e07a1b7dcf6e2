/// How a provider found by discovery got its client, kept with it in the store: what the
/// user trusted, and what the server answered to the registration (RFC 7591 §3.2.1),
/// which may differ from what was asked.
public struct DiscoveredOrigin: Codable, Sendable, Equatable {
    /// How the client was obtained.
    public enum Client: String, Codable, Sendable, Equatable {
        /// RFC 7591 dynamic client registration.
        case registered
        /// A Client ID Metadata Document URL (`[discovery] client_id_metadata_document`).
        case metadataDocument = "metadata_document"
    }

    public var client: Client
    /// RFC 7591 `token_endpoint_auth_method` as the server answered it.
    public var tokenEndpointAuthMethod: String?
    /// RFC 7592: the credential and URL that manage the registration. Never shown.
    public var registrationAccessToken: String?
    public var registrationClientURI: String?
    /// When the registration was made (Unix seconds).
    public var registeredAt: Int64

    public init(client: Client, tokenEndpointAuthMethod: String? = nil, registrationAccessToken: String? = nil,
                registrationClientURI: String? = nil, registeredAt: Int64) {
        self.client = client
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.registrationAccessToken = registrationAccessToken
        self.registrationClientURI = registrationClientURI
        self.registeredAt = registeredAt
    }

    enum CodingKeys: String, CodingKey {
        case client
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
        case registrationAccessToken = "registration_access_token"
        case registrationClientURI = "registration_client_uri"
        case registeredAt = "registered_at"
    }
}
