/// `discovery.resolve` params: a protected resource no configured provider lists, and
/// where its metadata is when a 401 named it (RFC 9728 §5.1 `resource_metadata`).
public struct DiscoveryResolveParams: Codable, Sendable, Equatable {
    public var resource: String
    /// The `resource_metadata` URL of the resource's `WWW-Authenticate` challenge; absent:
    /// the well-known URL built from `resource` (RFC 9728 §3.1).
    public var resourceMetadata: String?

    public init(resource: String, resourceMetadata: String? = nil) {
        self.resource = resource
        self.resourceMetadata = resourceMetadata
    }

    enum CodingKeys: String, CodingKey {
        case resource
        case resourceMetadata = "resource_metadata"
    }
}

/// What the resource's metadata says, and where the broker stands with its server.
public struct DiscoveryResolveResult: Codable, Sendable, Equatable {
    /// The resource, as its metadata names it (identical to the one asked for).
    public var resource: String
    /// The provider that serves it: a configured one, or one found by discovery under a
    /// generated name (`authctl status` lists it).
    public var provider: String
    /// The authorization server's issuer.
    public var issuer: String
    /// The hosts the user is shown before trusting the server.
    public var resourceHost: String
    public var issuerHost: String
    /// Whether the server is trusted: configured, in `trusted_issuers`, `mode = "allow"`,
    /// or trusted by the user before. Nothing is sent to it until it is.
    public var trusted: Bool
    /// Whether an account of the provider is signed in.
    public var signedIn: Bool
    /// Whether the provider is one of config.toml's (the metadata named its issuer).
    public var configured: Bool

    public init(resource: String, provider: String, issuer: String, resourceHost: String, issuerHost: String,
                trusted: Bool, signedIn: Bool, configured: Bool) {
        self.resource = resource
        self.provider = provider
        self.issuer = issuer
        self.resourceHost = resourceHost
        self.issuerHost = issuerHost
        self.trusted = trusted
        self.signedIn = signedIn
        self.configured = configured
    }

    enum CodingKeys: String, CodingKey {
        case resource, provider, issuer, trusted, configured
        case resourceHost = "resource_host"
        case issuerHost = "issuer_host"
        case signedIn = "signed_in"
    }
}

/// `discovery.trust` params: the user's yes to a resource's authorization server, as
/// `discovery.resolve` showed it. Only `authctl login --resource` sends it, after asking.
public struct DiscoveryTrustParams: Codable, Sendable, Equatable {
    public var resource: String
    public var issuer: String

    public init(resource: String, issuer: String) {
        self.resource = resource
        self.issuer = issuer
    }
}

/// `discovery.trust` result: the provider the server now is, registered and ready for a
/// sign-in.
public struct DiscoveryTrustResult: Codable, Sendable, Equatable {
    public var provider: String
    public var trusted: Bool
    /// How authbroker got its client at that server: `configured`, `metadata_document`
    /// (a Client ID Metadata Document) or `registered` (RFC 7591).
    public var client: String

    public init(provider: String, trusted: Bool, client: String) {
        self.provider = provider
        self.trusted = trusted
        self.client = client
    }
}

/// `provider.rename` params: a provider found by discovery gets the name the user chooses
/// (its generated one is the issuer's host). Its accounts and client move with it.
public struct ProviderRenameParams: Codable, Sendable, Equatable {
    public var provider: String
    public var name: String

    public init(provider: String, name: String) {
        self.provider = provider
        self.name = name
    }
}

/// `provider.rename` result.
public struct ProviderRenameResult: Codable, Sendable, Equatable {
    public var provider: String
    /// The accounts moved to the new name.
    public var accounts: Int

    public init(provider: String, accounts: Int) {
        self.provider = provider
        self.accounts = accounts
    }
}
