/// `aws.credentials` params: temporary AWS credentials from STS `AssumeRoleWithWebIdentity`,
/// with the account's ID token (or its access token for `audience`) as the web identity
/// token. Every member but `role_arn` falls back to config.toml's `[aws]` table.
public struct AWSCredentialsParams: Codable, Sendable, Equatable {
    public var provider: String?
    public var account: String?
    /// The IAM role to assume, `arn:aws:iam::ACCOUNT:role/NAME` (required).
    public var roleARN: String?
    /// Send the account's access token for this audience (a resource of the provider)
    /// instead of its ID token.
    public var audience: String?
    /// Send the ID token even when `[aws] audience` names an audience.
    public var idToken: Bool?
    /// An inline session policy (JSON), which narrows what the role grants.
    public var sessionPolicy: String?
    /// Seconds the credentials live, 900 to 43200 (the role's maximum session duration).
    public var durationSeconds: Int?
    /// The region whose STS endpoint is asked (`https://sts.REGION.amazonaws.com`).
    public var region: String?
    /// The STS endpoint: `https://`, or `http://` on a loopback host only.
    public var stsEndpoint: String?
    public var roleSessionName: String?

    public init(roleARN: String? = nil, provider: String? = nil, account: String? = nil, audience: String? = nil,
                idToken: Bool? = nil, sessionPolicy: String? = nil, durationSeconds: Int? = nil, region: String? = nil,
                stsEndpoint: String? = nil, roleSessionName: String? = nil) {
        self.roleARN = roleARN
        self.provider = provider
        self.account = account
        self.audience = audience
        self.idToken = idToken
        self.sessionPolicy = sessionPolicy
        self.durationSeconds = durationSeconds
        self.region = region
        self.stsEndpoint = stsEndpoint
        self.roleSessionName = roleSessionName
    }

    enum CodingKeys: String, CodingKey {
        case provider, account, audience, region
        case roleARN = "role_arn"
        case idToken = "id_token"
        case sessionPolicy = "session_policy"
        case durationSeconds = "duration_seconds"
        case stsEndpoint = "sts_endpoint"
        case roleSessionName = "role_session_name"
    }
}

/// `aws.credentials` result: what `credential_process` prints (docs/integrations.md).
/// Secrets: never logged, never written to a file by the daemon or authctl.
public struct AWSCredentialsResult: Codable, Sendable, Equatable {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String
    /// Unix seconds: STS's `Expiration`.
    public var expiresAt: Int64
    /// The assumed role's session ARN (`arn:aws:sts::…:assumed-role/ROLE/SESSION`), when STS names it.
    public var assumedRoleARN: String?
    public var provider: String
    public var account: String
    /// True when the daemon's cache answered, without a request to STS.
    public var cached: Bool

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String, expiresAt: Int64,
                assumedRoleARN: String?, provider: String, account: String, cached: Bool) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.expiresAt = expiresAt
        self.assumedRoleARN = assumedRoleARN
        self.provider = provider
        self.account = account
        self.cached = cached
    }

    enum CodingKeys: String, CodingKey {
        case provider, account, cached
        case accessKeyID = "access_key_id"
        case secretAccessKey = "secret_access_key"
        case sessionToken = "session_token"
        case expiresAt = "expires_at"
        case assumedRoleARN = "assumed_role_arn"
    }
}

/// `account.id_token` params: the account's ID token, to present to a cloud's STS
/// (workload identity federation); one about to expire is renewed first.
public struct IDTokenParams: Codable, Sendable, Equatable {
    public var provider: String?
    public var account: String?
    /// Seconds the ID token must still live (default: the daemon's `refresh_margin`).
    public var minTTL: Int?

    public init(provider: String? = nil, account: String? = nil, minTTL: Int? = nil) {
        self.provider = provider
        self.account = account
        self.minTTL = minTTL
    }

    enum CodingKeys: String, CodingKey {
        case provider, account
        case minTTL = "min_ttl"
    }
}

/// `account.id_token` result.
public struct IDTokenResult: Codable, Sendable, Equatable {
    public var idToken: String
    /// Unix seconds: the token's `exp`.
    public var expiresAt: Int64
    public var provider: String
    public var account: String

    public init(idToken: String, expiresAt: Int64, provider: String, account: String) {
        self.idToken = idToken
        self.expiresAt = expiresAt
        self.provider = provider
        self.account = account
    }

    enum CodingKeys: String, CodingKey {
        case provider, account
        case idToken = "id_token"
        case expiresAt = "expires_at"
    }
}
