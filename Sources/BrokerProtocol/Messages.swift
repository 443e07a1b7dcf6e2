/// Params and results of every method. Member names on the wire are snake_case and are
/// part of the protocol documented in docs/protocol.md.

/// An account as `account.list`, `login.wait` and `daemon.status` show it.
public struct AccountInfo: Codable, Sendable, Equatable {
    public var provider: String
    /// The `sub` claim: the account's id at the provider.
    public var subject: String
    /// A human name for the account when the provider gave one: `preferred_username`, else
    /// `email`, else `name`, from the ID token, else from the userinfo endpoint.
    public var username: String?
    /// `ready` or `login_required`; a newer daemon's other states are kept as `unknown`.
    public var state: AccountState
    /// What people are shown: `username`, else `subject@issuer-host` (docs/providers.md).
    /// Accepted wherever an account is named. Absent from daemons before this member.
    public var displayName: String?
    /// Set while the account's newest refresh token is only in the daemon's memory (the
    /// store refused it: locked, gone, full): the sentence that says why and what a restart
    /// would cost. Absent when it is saved.
    public var unsaved: String?
    /// The store's failure in one word (`locked`, `unavailable`, `timed_out`, `failed`),
    /// with `unsaved`.
    public var unsavedReason: String?
    /// In a sign-in's answer that replaced an earlier sign-in of the account: what became of
    /// the refresh token it replaced (revoked at the provider, or why not). Absent otherwise.
    public var replacedSignIn: String?

    enum CodingKeys: String, CodingKey {
        case provider, subject, username, state, unsaved
        case displayName = "display_name"
        case unsavedReason = "unsaved_reason"
        case replacedSignIn = "replaced_sign_in"
    }

    public init(provider: String, subject: String, username: String?, state: AccountState, displayName: String? = nil,
                unsaved: String? = nil, unsavedReason: String? = nil) {
        self.provider = provider
        self.subject = subject
        self.username = username
        self.state = state
        self.displayName = displayName
        self.unsaved = unsaved
        self.unsavedReason = unsavedReason
    }

    /// The name to show: `displayName`, else `username`, else the subject.
    public var shownName: String { displayName ?? username ?? subject }
}

public struct AccountListResult: Codable, Sendable, Equatable {
    public var accounts: [AccountInfo]
    /// Set while the secret store's accounts cannot be read (the daemon started without
    /// it): the sentence saying why. `accounts` then lacks those accounts, which are not gone.
    public var storeUnreadable: String?
    public init(accounts: [AccountInfo], storeUnreadable: String? = nil) {
        self.accounts = accounts
        self.storeUnreadable = storeUnreadable
    }

    enum CodingKeys: String, CodingKey {
        case accounts
        case storeUnreadable = "store_unreadable"
    }
}

/// `login.start` params.
public struct LoginStartParams: Codable, Sendable, Equatable {
    public var provider: String?
    /// `browser` (authorization code + PKCE, the default), `device` (RFC 8628) or `terminal`
    /// (questions asked through `login.wait` / `login.answer`, docs/sign-in.md). Another
    /// value is refused when the daemon reads the request.
    public var flow: LoginFlow?
    /// Extra authorization parameters for this sign-in (`login_hint`, `prompt`, …), on top of
    /// the provider's configured ones. Parameters the protocol owns are refused.
    public var params: [String: String]?
    /// Seconds the browser sign-in may take (default: the daemon's `login_timeout`).
    public var timeout: Int?
    /// Sign in for this one configured resource only: with `refresh_tokens =
    /// "one-per-resource"` its refresh token serves that resource alone (docs/providers.md).
    public var resource: String?
    /// Join the provider's sign-in in progress instead of replacing it, and start one only
    /// when there is none: a sign-in started so is announced by a desktop notification.
    public var join: Bool?

    public init(provider: String? = nil, flow: LoginFlow? = nil, params: [String: String]? = nil, timeout: Int? = nil,
                resource: String? = nil, join: Bool? = nil) {
        self.provider = provider
        self.flow = flow
        self.params = params
        self.timeout = timeout
        self.resource = resource
        self.join = join
    }

    enum CodingKeys: String, CodingKey {
        case provider, flow, params, timeout, resource, join
    }

    /// Reads `flow` strictly: a flow this daemon does not know is a bad request, not a
    /// sign-in of some other kind.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        provider = try c.decodeIfPresent(String.self, forKey: .provider)
        flow = try c.decodeKnownIfPresent(LoginFlow.self, forKey: .flow)
        params = try c.decodeIfPresent([String: String].self, forKey: .params)
        timeout = try c.decodeIfPresent(Int.self, forKey: .timeout)
        resource = try c.decodeIfPresent(String.self, forKey: .resource)
        join = try c.decodeIfPresent(Bool.self, forKey: .join)
    }
}

/// `login.start` result: what the user must open or type.
public struct LoginStartResult: Codable, Sendable, Equatable {
    /// Pass to `login.wait`.
    public var loginID: String
    public var provider: String
    public var flow: LoginFlow
    public var verificationURI: String?
    public var verificationURIComplete: String?
    public var userCode: String?
    /// Browser flow: the URL to open.
    public var authorizationURL: String?
    /// Unix seconds after which the sign-in can no longer complete.
    public var expiresAt: Int64
    /// With `join`: true when this is a sign-in that was already in progress.
    public var joined: Bool?
    /// With `join`: true when a desktop notification announces the sign-in (its "Sign in"
    /// button opens the URL), so the caller need not open a browser itself.
    public var notified: Bool?

    public init(loginID: String, provider: String, flow: LoginFlow, verificationURI: String? = nil, verificationURIComplete: String? = nil,
                userCode: String? = nil, authorizationURL: String? = nil, expiresAt: Int64, joined: Bool? = nil, notified: Bool? = nil) {
        self.loginID = loginID
        self.provider = provider
        self.flow = flow
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.userCode = userCode
        self.authorizationURL = authorizationURL
        self.expiresAt = expiresAt
        self.joined = joined
        self.notified = notified
    }

    enum CodingKeys: String, CodingKey {
        case loginID = "login_id"
        case provider, flow
        case verificationURI = "verification_uri"
        case verificationURIComplete = "verification_uri_complete"
        case userCode = "user_code"
        case authorizationURL = "authorization_url"
        case expiresAt = "expires_at"
        case joined, notified
    }
}

/// `login.wait` params: the `login_id` from `login.start`, or the provider whose pending
/// sign-in to wait for.
public struct LoginWaitParams: Codable, Sendable, Equatable {
    public var loginID: String?
    public var provider: String?

    public init(loginID: String? = nil, provider: String? = nil) {
        self.loginID = loginID
        self.provider = provider
    }

    enum CodingKeys: String, CodingKey {
        case loginID = "login_id"
        case provider
    }
}

/// `login.wait` result: the signed-in account, or (flow `terminal` only) the question the
/// sign-in waits on, to be answered with `login.answer` and followed by another `login.wait`.
public struct LoginWaitResult: Codable, Sendable, Equatable {
    public var account: AccountInfo?
    public var prompt: LoginPrompt?
    public init(account: AccountInfo) { self.account = account }
    public init(prompt: LoginPrompt) { self.prompt = prompt }
}

/// `logout` params.
public struct LogoutParams: Codable, Sendable, Equatable {
    public var provider: String?
    public var account: String?
    /// Only forget locally: no revocation, no provider session ended.
    public var local: Bool?

    public init(provider: String? = nil, account: String? = nil, local: Bool? = nil) {
        self.provider = provider
        self.account = account
        self.local = local
    }
}

public struct LogoutResult: Codable, Sendable, Equatable {
    public var provider: String
    public var account: String
    /// Whether the provider confirmed the revocation of the refresh token (RFC 7009).
    public var revoked: Bool
    /// Why revocation was not done, when it was not ("no revocation endpoint", …).
    public var revocationNote: String?
    /// RP-initiated logout: open this to end the session at the provider too. The daemon's
    /// one-time loopback sign-out page (which posts the ID token as `id_token_hint`) when
    /// the account has an ID token, else the provider's URL.
    public var endSessionURL: String?
    /// The provider's end-session URL without `id_token_hint`, for a browser on another
    /// computer; only when `endSessionURL` is the loopback page.
    public var endSessionDirectURL: String?

    public init(provider: String, account: String, revoked: Bool, revocationNote: String?, endSessionURL: String? = nil,
                endSessionDirectURL: String? = nil) {
        self.provider = provider
        self.account = account
        self.revoked = revoked
        self.revocationNote = revocationNote
        self.endSessionURL = endSessionURL
        self.endSessionDirectURL = endSessionDirectURL
    }

    enum CodingKeys: String, CodingKey {
        case provider, account, revoked
        case revocationNote = "revocation_note"
        case endSessionURL = "end_session_url"
        case endSessionDirectURL = "end_session_direct_url"
    }
}

/// `account.whoami` and `account.userinfo` params: which account.
public struct AccountParams: Codable, Sendable, Equatable {
    public var provider: String?
    public var account: String?
    /// As `token.get`'s: the caller's `AUTHBROKER_ACCOUNT`, for an `environment = true` rule.
    public var accountHint: String?

    public init(provider: String? = nil, account: String? = nil, accountHint: String? = nil) {
        self.provider = provider
        self.account = account
        self.accountHint = accountHint
    }

    enum CodingKeys: String, CodingKey {
        case provider, account
        case accountHint = "account_hint"
    }
}

/// `account.whoami` / `account.userinfo` result: the claims (verified ID-token claims, or
/// the UserInfo endpoint's answer) as JSON values.
public struct ClaimsResult: Codable, Sendable, Equatable {
    public var provider: String
    public var subject: String
    public var claims: [String: JSONValue]
    /// What chose the account, as `token.get`'s `chosen_by`.
    public var chosenBy: String?

    public init(provider: String, subject: String, claims: [String: JSONValue], chosenBy: String? = nil) {
        self.provider = provider
        self.subject = subject
        self.claims = claims
        self.chosenBy = chosenBy
    }

    enum CodingKeys: String, CodingKey {
        case provider, subject, claims
        case chosenBy = "chosen_by"
    }
}

/// One cached access token as `daemon.status` shows it: never its value.
public struct CachedTokenInfo: Codable, Sendable, Equatable {
    public var resource: String?
    public var scopes: [String]
    public var expiresAt: Int64

    public init(resource: String?, scopes: [String], expiresAt: Int64) {
        self.resource = resource
        self.scopes = scopes
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey {
        case resource, scopes
        case expiresAt = "expires_at"
    }
}

public struct ProviderStatus: Codable, Sendable, Equatable {
    public var name: String
    public var issuer: String
    public var clientID: String
    public var accounts: [AccountStatus]

    public init(name: String, issuer: String, clientID: String, accounts: [AccountStatus]) {
        self.name = name
        self.issuer = issuer
        self.clientID = clientID
        self.accounts = accounts
    }

    enum CodingKeys: String, CodingKey {
        case name, issuer
        case clientID = "client_id"
        case accounts
    }
}

public struct AccountStatus: Codable, Sendable, Equatable {
    public var account: AccountInfo
    public var tokens: [CachedTokenInfo]

    public init(account: AccountInfo, tokens: [CachedTokenInfo]) {
        self.account = account
        self.tokens = tokens
    }
}

/// Counters since the daemon started.
public struct Counters: Codable, Sendable, Equatable {
    public var requests: Int
    public var tokenRequests: Int
    public var cacheHits: Int
    public var refreshes: Int
    public var providerErrors: Int
    public var errors: Int

    public init(requests: Int = 0, tokenRequests: Int = 0, cacheHits: Int = 0, refreshes: Int = 0, providerErrors: Int = 0, errors: Int = 0) {
        self.requests = requests
        self.tokenRequests = tokenRequests
        self.cacheHits = cacheHits
        self.refreshes = refreshes
        self.providerErrors = providerErrors
        self.errors = errors
    }

    enum CodingKeys: String, CodingKey {
        case requests
        case tokenRequests = "token_requests"
        case cacheHits = "cache_hits"
        case refreshes
        case providerErrors = "provider_errors"
        case errors
    }
}

public struct DaemonStatusResult: Codable, Sendable, Equatable {
    public var version: String
    public var pid: Int32
    public var uptimeSeconds: Double
    /// `secret-service`, `kernel-keyring` or `memory`.
    public var store: String
    public var socket: String
    public var providers: [ProviderStatus]
    public var counters: Counters
    /// Set while the store's accounts are not loaded (the daemon started without a usable
    /// Secret Service): why, and what to do. Absent when the store is in use.
    public var storeUnavailable: StoreUnavailableStatus?
    /// Set when the last reload (SIGHUP) was refused: the daemon runs on the configuration
    /// before it. Absent after a reload that took effect, or when none was asked for.
    public var reloadRefused: ReloadRefusedStatus?

    public init(version: String, pid: Int32, uptimeSeconds: Double, store: String, socket: String, providers: [ProviderStatus], counters: Counters,
                storeUnavailable: StoreUnavailableStatus? = nil, reloadRefused: ReloadRefusedStatus? = nil) {
        self.version = version
        self.pid = pid
        self.uptimeSeconds = uptimeSeconds
        self.store = store
        self.socket = socket
        self.providers = providers
        self.counters = counters
        self.storeUnavailable = storeUnavailable
        self.reloadRefused = reloadRefused
    }

    enum CodingKeys: String, CodingKey {
        case version, pid
        case uptimeSeconds = "uptime_seconds"
        case store, socket, providers, counters
        case storeUnavailable = "store_unavailable"
        case reloadRefused = "reload_refused"
    }
}

/// Why the store's accounts are not loaded: `reason` is `unavailable`, `locked`,
/// `timed_out` or `failed`; `message` says what to do.
public struct StoreUnavailableStatus: Codable, Sendable, Equatable {
    public var reason: String
    public var message: String

    public init(reason: String, message: String) {
        self.reason = reason
        self.message = message
    }
}

/// A reload that was refused: when (Unix seconds) and why.
public struct ReloadRefusedStatus: Codable, Sendable, Equatable {
    public var at: Int64
    public var message: String

    public init(at: Int64, message: String) {
        self.at = at
        self.message = message
    }
}

/// `provider.set_secret` params: a confidential client's secret, to keep in the Secret
/// Service instead of config.toml. The daemon never logs or echoes it.
public struct SetSecretParams: Codable, Sendable, Equatable {
    public var provider: String?
    public var clientSecret: String

    public init(provider: String? = nil, clientSecret: String) {
        self.provider = provider
        self.clientSecret = clientSecret
    }

    enum CodingKeys: String, CodingKey {
        case provider
        case clientSecret = "client_secret"
    }
}

public struct SetSecretResult: Codable, Sendable, Equatable {
    public var provider: String
    public var stored: Bool
    /// Where it was stored: `[daemon] store`, `secret-service`, `kernel-keyring` or `memory`
    /// (absent from daemons before it was added).
    public var store: String?

    public init(provider: String, stored: Bool, store: String? = nil) {
        self.provider = provider
        self.stored = stored
        self.store = store
    }
}
