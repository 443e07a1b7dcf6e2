/// `token.reject` params: the access token an API refused, or the cache key it was served
/// under (the same members as `token.get`). Either `access_token`, or any of the others.
public struct TokenRejectParams: Codable, Sendable, Equatable {
    /// The refused token itself. Never echoed in an answer or a log line.
    public var accessToken: String?
    public var resource: String?
    public var scopes: [String]?
    public var provider: String?
    public var account: String?
    /// The extra token request parameters the token was asked with (`token.get`'s
    /// `params`): tokens of other params are other tokens.
    public var params: [String: String]?

    public init(accessToken: String? = nil, resource: String? = nil, scopes: [String]? = nil,
                provider: String? = nil, account: String? = nil, params: [String: String]? = nil) {
        self.accessToken = accessToken
        self.resource = resource
        self.scopes = scopes
        self.provider = provider
        self.account = account
        self.params = params
    }

    /// The same key as a `token.get` request, for `authctl token --fresh`.
    public init(key request: TokenGetParams) {
        self.init(resource: request.resource, scopes: request.scopes, provider: request.provider, account: request.account,
                  params: request.params)
    }

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case resource, scopes, provider, account, params
    }
}

/// `token.reject` result.
public struct TokenRejectResult: Codable, Sendable, Equatable {
    /// True when a cached token was dropped; false when none was cached (already dropped,
    /// refreshed since, or never there). Either way the next `token.get` does not serve it.
    public var dropped: Bool

    public init(dropped: Bool) { self.dropped = dropped }
}
