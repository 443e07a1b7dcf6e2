/// A protected resource's metadata (RFC 9728 §2), reduced to what authbroker uses: which
/// authorization servers issue tokens for it. `authorizationServers` is required here
/// (RFC 9728 makes it optional): a resource that names none cannot be signed in to.
public struct ProtectedResourceMetadata: Codable, Sendable, Equatable {
    /// The resource identifier; must be identical to the one asked about (§3.3).
    public var resource: String
    /// Issuer identifiers of the authorization servers (`authorization_servers`).
    public var authorizationServers: [String]
    public var scopesSupported: [String]?
    /// A name for the user (`resource_name`).
    public var resourceName: String?
    /// True when the resource takes only DPoP-bound access tokens (RFC 9449 §5.1).
    public var dpopBoundAccessTokensRequired: Bool?
    public var dpopSigningAlgValuesSupported: [String]?

    enum CodingKeys: String, CodingKey {
        case resource
        case authorizationServers = "authorization_servers"
        case scopesSupported = "scopes_supported"
        case resourceName = "resource_name"
        case dpopBoundAccessTokensRequired = "dpop_bound_access_tokens_required"
        case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
    }

    /// Makes metadata by hand (tests, resources configured without discovery).
    public init(resource: String, authorizationServers: [String], scopesSupported: [String]? = nil,
                resourceName: String? = nil, dpopBoundAccessTokensRequired: Bool? = nil,
                dpopSigningAlgValuesSupported: [String]? = nil) {
        self.resource = resource
        self.authorizationServers = authorizationServers
        self.scopesSupported = scopesSupported
        self.resourceName = resourceName
        self.dpopBoundAccessTokensRequired = dpopBoundAccessTokensRequired
        self.dpopSigningAlgValuesSupported = dpopSigningAlgValuesSupported
    }
}

extension ProtectedResourceMetadata: DocumentDecoding {
    /// Decodes the document; absent or null `authorization_servers` read as none, which
    /// `ResourceDiscovery` refuses with the same sentence as an empty list.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        resource = try container.decode(String.self, forKey: .resource)
        authorizationServers = try container.decodeIfPresent([String].self, forKey: .authorizationServers) ?? []
        scopesSupported = try container.decodeIfPresent([String].self, forKey: .scopesSupported)
        resourceName = try container.decodeIfPresent(String.self, forKey: .resourceName)
        dpopBoundAccessTokensRequired = try container.decodeIfPresent(Bool.self, forKey: .dpopBoundAccessTokensRequired)
        dpopSigningAlgValuesSupported = try container.decodeIfPresent([String].self, forKey: .dpopSigningAlgValuesSupported)
    }

    static func wrongType(_ member: String, in place: String) -> String {
        let expected = expected(member, booleans: [CodingKeys.dpopBoundAccessTokensRequired.rawValue],
                                lists: [CodingKeys.authorizationServers.rawValue])
        return "\(place) is not valid resource metadata: its \(member) is not \(expected) (RFC 9728 §2); the resource's administrators must correct it"
    }

    static func unreadable(in place: String) -> String {
        "\(place) is not valid resource metadata: it is not a JSON object (RFC 9728 §3.2)"
    }

    static func noAuthorizationServer(in place: String) -> String {
        "\(place) names no authorization server (authorization_servers), so authbroker cannot tell where to sign in for it; its administrators must list one, or the provider must be set in config.toml"
    }
}

/// Metadata fetched from a server, with how long it may be used before it is fetched again.
public struct Fetched<Value: Sendable & Equatable>: Sendable, Equatable {
    public var value: Value
    /// Seconds from the answer's `Cache-Control` (`CacheControl.maxAge`): 0 for
    /// `no-store` or `no-cache`, nil when the server said nothing.
    public var maxAge: Int?

    public init(value: Value, maxAge: Int?) {
        self.value = value
        self.maxAge = maxAge
    }
}
