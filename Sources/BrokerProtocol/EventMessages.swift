/// `events.subscribe` and the `event` notifications a subscribed connection receives
/// (docs/protocol.md). No member ever carries a token.

/// `events.subscribe` params: both filters optional; absent means every provider / kind.
public struct EventsSubscribeParams: Codable, Sendable, Equatable {
    public var providers: [String]?
    public var kinds: [String]?

    public init(providers: [String]? = nil, kinds: [String]? = nil) {
        self.providers = providers
        self.kinds = kinds
    }
}

/// `events.subscribe` / `events.unsubscribe` result.
public struct EventsSubscribeResult: Codable, Sendable, Equatable {
    public var subscribed: Bool
    /// The kinds this connection will be sent.
    public var kinds: [String]

    public init(subscribed: Bool, kinds: [String]) {
        self.subscribed = subscribed
        self.kinds = kinds
    }
}

/// What an `event` notification reports.
public enum EventKind: String, Codable, Sendable, CaseIterable {
    /// A token was refreshed at the provider: its cache key and new expiry.
    case tokenRefreshed = "token_refreshed"
    case signedIn = "signed_in"
    case signedOut = "signed_out"
    /// The provider refused the refresh token: the account (or one resource of it) must sign in again.
    case loginRequired = "login_required"
    /// The provider stopped answering; the daemon backs off.
    case providerUnreachable = "provider_unreachable"
    /// The provider answers again after being unreachable.
    case providerBack = "provider_back"
}

/// The params of one `event` notification. Members that do not apply to a kind are left out.
public struct BrokerEvent: Codable, Sendable, Equatable {
    public var kind: EventKind
    public var provider: String
    /// The account's display name, as `token.get` returns it.
    public var account: String?
    public var subject: String?
    public var resource: String?
    public var scopes: [String]?
    /// Unix seconds: when the refreshed token expires.
    public var expiresAt: Int64?

    public init(kind: EventKind, provider: String, account: String? = nil, subject: String? = nil,
                resource: String? = nil, scopes: [String]? = nil, expiresAt: Int64? = nil) {
        self.kind = kind
        self.provider = provider
        self.account = account
        self.subject = subject
        self.resource = resource
        self.scopes = scopes
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case kind, provider, account, subject, resource, scopes
        case expiresAt = "expires_at"
    }
}

/// One notification line: `{"jsonrpc":"2.0","method":"event","params":{…}}`, no id.
public struct EventNotification: Codable, Sendable {
    public var jsonrpc = "2.0"
    public var method = "event"
    public var params: BrokerEvent

    public init(_ params: BrokerEvent) { self.params = params }
}
