/// `token.get`: params and result. Member names on the wire are snake_case and are part of
/// the protocol documented in docs/protocol.md.

/// `token.get` params: all optional; the provider defaults to the only one configured.
public struct TokenGetParams: Codable, Sendable, Equatable {
    public var resource: String?
    public var scopes: [String]?
    public var provider: String?
    public var account: String?
    public var minTTL: Int?
    /// Extra token request parameters (Auth0's `audience`, Azure's `claims`, …), sent on the
    /// refresh and part of the cache key; the protocol's own names are refused.
    public var params: [String: String]?
    /// Seconds the caller will wait for a sign-in when the account needs one: the daemon
    /// starts (or joins) the provider's one pending browser sign-in, announces it, and
    /// answers with the token once it is done. Absent: `login_required` at once.
    public var waitForSignIn: Int?
    /// The account the caller's environment names (`AUTHBROKER_ACCOUNT`, which authctl
    /// sends): used only when an account rule of the provider with `environment = true`
    /// allows it, and only when `account` is absent (docs/configuration.md).
    public var accountHint: String?
    /// What the caller knows of where it works, for the provider's account rules
    /// (`[[providers.NAME.accounts]]`): the git remote a credential helper is asked for.
    public var context: TokenContext?

    public init(resource: String? = nil, scopes: [String]? = nil, provider: String? = nil, account: String? = nil,
                minTTL: Int? = nil, params: [String: String]? = nil, waitForSignIn: Int? = nil,
                accountHint: String? = nil, context: TokenContext? = nil) {
        self.resource = resource
        self.scopes = scopes
        self.provider = provider
        self.account = account
        self.minTTL = minTTL
        self.params = params
        self.waitForSignIn = waitForSignIn
        self.accountHint = accountHint
        self.context = context
    }

    enum CodingKeys: String, CodingKey {
        case resource, scopes, provider, account, params, context
        case minTTL = "min_ttl"
        case waitForSignIn = "wait_for_sign_in"
        case accountHint = "account_hint"
    }

    /// The `wait_for_sign_in` a request may ask for, in seconds: as long as a sign-in may last.
    @inlinable public static var waitForSignInRange: ClosedRange<Int> { 1...3600 }

    /// The `min_ttl` a request may ask for, in seconds: up to a day. The daemon, authctl's
    /// parser and its fast path all check this one range.
    @inlinable public static var minTTLRange: ClosedRange<Int> { 0...86_400 }
}

/// `token.get`'s `context`: what the caller says about where it works, matched by the
/// provider's account rules. The caller's working directory is not here: the daemon reads
/// it from the process that connected.
public struct TokenContext: Codable, Sendable, Equatable {
    /// The remote URL git asks a credential helper about (`https://github.com/acme/app.git`;
    /// the path only with `credential.useHttpPath`).
    public var gitRemote: String?

    public init(gitRemote: String? = nil) {
        self.gitRemote = gitRemote
    }

    enum CodingKeys: String, CodingKey {
        case gitRemote = "git_remote"
    }
}

/// `token.get` result.
public struct TokenGetResult: Codable, Sendable, Equatable {
    public var accessToken: String
    public var tokenType: String
    /// Unix seconds.
    public var expiresAt: Int64
    public var scope: String?
    public var resource: String?
    public var provider: String
    public var account: String
    /// What chose the account: `"account param"`, `"directory ~/work/**"`,
    /// `"git_remote https://github.com/acme/*"`, `"environment"`, `"default_account"` or
    /// `"only account"` (docs/protocol.md). Absent from older daemons.
    public var chosenBy: String?
    /// True when `accessToken` is known to hold nothing JSON escapes (found once, when the
    /// token entered the daemon's cache): the answer copies it whole. Not part of the JSON
    /// and not compared; false (escape as usual) unless the daemon's cache says so.
    package var accessTokenIsPlainJSON = false
    /// Set on a cache hit's answer: what it rests on, so that the front door may answer the
    /// same request with the same bytes while that holds (`CacheHitStamp`). Not part of the
    /// JSON and not compared.
    package var cacheHit: CacheHitStamp?

    public init(accessToken: String, tokenType: String, expiresAt: Int64, scope: String?, resource: String?, provider: String, account: String,
                chosenBy: String? = nil) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scope = scope
        self.resource = resource
        self.provider = provider
        self.account = account
        self.chosenBy = chosenBy
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case scope, resource, provider, account
        case chosenBy = "chosen_by"
    }

    /// The token's members; `accessTokenIsPlainJSON`, a hint for writing it, is left out.
    public static func == (a: TokenGetResult, b: TokenGetResult) -> Bool {
        a.accessToken == b.accessToken && a.tokenType == b.tokenType && a.expiresAt == b.expiresAt && a.scope == b.scope
            && a.resource == b.resource && a.provider == b.provider && a.account == b.account && a.chosenBy == b.chosenBy
    }
}
