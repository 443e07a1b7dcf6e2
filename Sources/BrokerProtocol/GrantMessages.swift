/// One lease: the user's "Allow for N minutes" to a `confirm = true` rule's question
/// (docs/security.md, "Leases"). It lets that program (its executable's file, or for a
/// forwarded caller the ssh process carrying the forward) have tokens for what was asked,
/// without a question, until `expiresAt`. Kept in the daemon's memory only.
public struct GrantInfo: Codable, Sendable, Equatable {
    /// What `grants.revoke` takes.
    public var id: String
    /// The executable, as its path read when the lease was given.
    public var program: String
    /// Whether the lease is for a forwarded socket: `program` is OpenSSH, and the lease
    /// holds for the connections that one process (`pid`) carries.
    public var forwarded: Bool
    /// The ssh process of a forwarded lease; nil for an executable's lease, which holds for
    /// every process running that file.
    public var pid: Int32?
    /// The user the connection was of.
    public var uid: UInt32
    public var provider: String
    /// The resource asked for; nil: the provider's default audience.
    public var resource: String?
    /// A token exchange's audience besides its resource.
    public var audience: String?
    /// Unix seconds.
    public var grantedAt: Double
    public var expiresAt: Double

    public init(id: String, program: String, forwarded: Bool, pid: Int32?, uid: UInt32, provider: String,
                resource: String?, audience: String?, grantedAt: Double, expiresAt: Double) {
        self.id = id
        self.program = program
        self.forwarded = forwarded
        self.pid = pid
        self.uid = uid
        self.provider = provider
        self.resource = resource
        self.audience = audience
        self.grantedAt = grantedAt
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case id, program, forwarded, pid, uid, provider, resource, audience
        case grantedAt = "granted_at"
        case expiresAt = "expires_at"
    }
}

/// `grants.list` result: the leases in force, the oldest first.
public struct GrantsListResult: Codable, Sendable, Equatable {
    public var grants: [GrantInfo]

    public init(grants: [GrantInfo]) { self.grants = grants }
}

/// `grants.revoke` params: one lease by its id, or all of them.
public struct GrantsRevokeParams: Codable, Sendable, Equatable {
    public var id: String?
    public var all: Bool?

    public init(id: String? = nil, all: Bool? = nil) {
        self.id = id
        self.all = all
    }
}

/// `grants.revoke` result: how many leases ended.
public struct GrantsRevokeResult: Codable, Sendable, Equatable {
    public var revoked: Int

    public init(revoked: Int) { self.revoked = revoked }
}
