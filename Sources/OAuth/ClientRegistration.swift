/// What authbroker asks a registration endpoint for (RFC 7591 §2): a native public client.
/// Always sent besides: `application_type` "native" (OpenID Connect Dynamic Client
/// Registration §2), `token_endpoint_auth_method` "none" and `response_types` ["code"].
public struct ClientRegistrationRequest: Sendable, Equatable {
    /// Loopback redirect URIs, each with its port (RFC 8252 §7.3).
    public var redirectURIs: [String]
    /// e.g. ["authorization_code", "refresh_token"].
    public var grantTypes: [String]
    /// Space-separated scopes; not sent when nil.
    public var scope: String?
    public var clientName: String
    public var softwareID: String
    public var softwareVersion: String

    public init(redirectURIs: [String], grantTypes: [String] = ["authorization_code", "refresh_token"], scope: String? = nil,
                clientName: String = "authbroker", softwareID: String = "org.authbroker", softwareVersion: String) {
        self.redirectURIs = redirectURIs
        self.grantTypes = grantTypes
        self.scope = scope
        self.clientName = clientName
        self.softwareID = softwareID
        self.softwareVersion = softwareVersion
    }
}

extension ClientRegistrationRequest: Encodable {
    enum CodingKeys: String, CodingKey {
        case redirectURIs = "redirect_uris", grantTypes = "grant_types", scope, clientName = "client_name"
        case softwareID = "software_id", softwareVersion = "software_version", applicationType = "application_type"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method", responseTypes = "response_types"
        case clientConfidential = "client_confidential"
    }

    /// The request's JSON object, with the members always sent.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(redirectURIs, forKey: .redirectURIs)
        try container.encode(grantTypes, forKey: .grantTypes)
        try container.encodeIfPresent(scope, forKey: .scope)
        try container.encode(clientName, forKey: .clientName)
        try container.encode(softwareID, forKey: .softwareID)
        try container.encode(softwareVersion, forKey: .softwareVersion)
        try container.encode("native", forKey: .applicationType)
        try container.encode("none", forKey: .tokenEndpointAuthMethod)
        try container.encode(["code"], forKey: .responseTypes)
        // Glewlwyd's own member: without it, Glewlwyd 2.7 records a registration with
        // token_endpoint_auth_method "none" as a confidential client without a secret, whose
        // every token request is refused (unauthorized_client). Servers ignore members they
        // do not know (RFC 7591 §2).
        try container.encode(false, forKey: .clientConfidential)
    }
}

/// What the registration endpoint answered (RFC 7591 §3.2.1): use this, not what was
/// asked, since a server may change any of it (Glewlwyd 2.7 makes a public client
/// confidential and hands it a secret). The secret and the registration access token are
/// credentials: never logged, never in a sentence.
public struct ClientRegistration: Codable, Sendable, Equatable {
    public var clientID: String
    public var clientSecret: String?
    /// Unix seconds when the secret expires; 0 for never.
    public var clientSecretExpiresAt: Int?
    /// For reading or changing the registration later (RFC 7592).
    public var registrationAccessToken: String?
    public var registrationClientURI: String?
    public var tokenEndpointAuthMethod: String?
    public var grantTypes: [String]?
    public var redirectURIs: [String]?
    public var scope: String?

    enum CodingKeys: String, CodingKey {
        case clientID = "client_id"
        case clientSecret = "client_secret"
        case clientSecretExpiresAt = "client_secret_expires_at"
        case registrationAccessToken = "registration_access_token"
        case registrationClientURI = "registration_client_uri"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
        case grantTypes = "grant_types"
        case redirectURIs = "redirect_uris"
        case scope
    }

    public init(clientID: String, clientSecret: String? = nil, clientSecretExpiresAt: Int? = nil,
                registrationAccessToken: String? = nil, registrationClientURI: String? = nil,
                tokenEndpointAuthMethod: String? = nil, grantTypes: [String]? = nil, redirectURIs: [String]? = nil,
                scope: String? = nil) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.clientSecretExpiresAt = clientSecretExpiresAt
        self.registrationAccessToken = registrationAccessToken
        self.registrationClientURI = registrationClientURI
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.grantTypes = grantTypes
        self.redirectURIs = redirectURIs
        self.scope = scope
    }
}

extension ClientRegistration: DocumentDecoding {
    static func wrongType(_ member: String, in place: String) -> String {
        let expected = expected(member, numbers: [CodingKeys.clientSecretExpiresAt.rawValue],
                                lists: [CodingKeys.grantTypes.rawValue, CodingKeys.redirectURIs.rawValue])
        return "\(place) a registration whose \(member) is not \(expected) (RFC 7591 §3.2.1); the server's administrators must correct it"
    }

    static func missing(_ member: String, in place: String) -> String {
        "\(place) a registration without \(member) (RFC 7591 §3.2.1)"
    }

    static func unreadable(in place: String) -> String { "\(place) something that is not a JSON object" }
}
