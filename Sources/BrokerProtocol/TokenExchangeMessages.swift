/// `token.exchange` params (RFC 8693): a token for a downstream service, minted at the
/// provider from the account's own token. At least one of `audience` and `resource`.
public struct TokenExchangeParams: Codable, Sendable, Equatable {
    /// The service the new token is for, as the provider names it (RFC 8693 `audience`).
    public var audience: String?
    /// The URL of the service the new token is for (RFC 8693 / RFC 8707 `resource`).
    public var resource: String?
    public var scopes: [String]?
    public var provider: String?
    public var account: String?
    /// Which of the account's tokens is exchanged: `access_token` (default) or `id_token`.
    public var subjectTokenType: String?
    /// The type of token wanted: a short name (`access_token`, `id_token`, `jwt`) or a URN;
    /// default: the provider decides.
    public var requestedTokenType: String?
    public var minTTL: Int?

    public init(audience: String? = nil, resource: String? = nil, scopes: [String]? = nil, provider: String? = nil,
                account: String? = nil, subjectTokenType: String? = nil, requestedTokenType: String? = nil, minTTL: Int? = nil) {
        self.audience = audience
        self.resource = resource
        self.scopes = scopes
        self.provider = provider
        self.account = account
        self.subjectTokenType = subjectTokenType
        self.requestedTokenType = requestedTokenType
        self.minTTL = minTTL
    }

    enum CodingKeys: String, CodingKey {
        case audience, resource, scopes, provider, account
        case subjectTokenType = "subject_token_type"
        case requestedTokenType = "requested_token_type"
        case minTTL = "min_ttl"
    }
}
