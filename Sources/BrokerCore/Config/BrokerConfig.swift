import BrokerCrypto
import OAuth

/// The daemon's configuration, as read from config.toml (docs/configuration.md).
public struct BrokerConfig: Sendable, Equatable {
    public var daemon: DaemonSettings
    /// Sorted by name, so "the default provider" and listings are stable.
    public var providers: [ProviderConfig]
    /// `[[allow]]` rules; none means every process of the user may have every token.
    public var policy: CallerPolicy
    /// `[discovery]`: resources no provider lists (RFC 9728).
    public var discovery: DiscoverySettings
    /// `[aws]`: how `aws.credentials` asks STS.
    public var aws = AWSSettings()

    public init(daemon: DaemonSettings = DaemonSettings(), providers: [ProviderConfig], policy: CallerPolicy = CallerPolicy(),
                discovery: DiscoverySettings = DiscoverySettings()) {
        self.daemon = daemon
        self.providers = providers.sorted { $0.name < $1.name }
        self.policy = policy
        self.discovery = discovery
    }

    /// The providers config.toml names, without those found by discovery.
    public var configuredProviders: [ProviderConfig] { providers.filter { $0.discovered == nil } }

    public func provider(named name: String) -> ProviderConfig? {
        providers.first { $0.name == name }
    }
}

/// Where refresh tokens are kept.
public enum StoreKind: String, Sendable, Equatable {
    /// The freedesktop Secret Service, through libsecret.
    case secretService = "secret-service"
    /// The kernel's user keyring (keyctl): survives a restart of the daemon, not a reboot.
    case kernelKeyring = "kernel-keyring"
    /// Nothing persisted: sign in again after every restart.
    case memory
}

/// `[daemon]`.
public struct DaemonSettings: Sendable, Equatable {
    public var store: StoreKind
    /// Seconds: a token with less life left is refreshed before it is served.
    public var refreshMargin: Int
    /// Seconds the Secret Service may take to answer one call.
    public var storeTimeout: Int
    /// Seconds a provider may take to answer one HTTP request.
    public var httpTimeout: Int
    /// Seconds a provider may take to answer a refresh: longer than `httpTimeout`, because
    /// a rotating provider that takes the refresh and answers after the daemon stopped
    /// listening has spent the refresh token (docs/security.md). Shorter than `authctl`'s
    /// own call deadline (`BrokerConnection.defaultCallTimeout`, 15 s) by default, so that
    /// a caller always gets the daemon's sentence for a slow provider, not its own time-out.
    public var refreshTimeout: Int = 12
    /// The provider used when a request names none and several are configured.
    public var defaultProvider: String? = nil
    /// Seconds a browser sign-in may take before its loopback port is freed.
    public var loginTimeout: Int = 300
    /// Whether a sign-in started on demand (a caller waiting for one) is announced by a
    /// desktop notification with a "Sign in" button.
    public var signInNotifications = true
    /// Seconds the user has to answer a `confirm = true` rule's question; no answer denies.
    public var confirmTimeout: Int = 60
    /// Seconds by which the provider's clock may differ from the host's when an ID token's
    /// `exp` and `iat` are checked (`clock_skew`). 300, as Microsoft's IdentityModel
    /// (`TokenValidationParameters.DefaultClockSkew`) and Google's API client
    /// (`DEFAULT_TIME_SKEW_SECONDS`) allow: the ID token is read once, straight from the
    /// provider's token endpoint over TLS and with the sign-in's nonce, never served as a
    /// credential, so a wider window costs nothing, while a narrow one refuses the sign-in
    /// of every host whose clock drifted a few minutes, after the user approved it.
    public var clockSkew: Int = 300
    /// Seconds a kernel-keyring key lives after the daemon last saved, loaded or renewed
    /// it (`kernel_keyring_ttl`); 0 = no expiry. The user keyring belongs to the uid number,
    /// so a key without one outlives the account (docs/security.md, "The kernel keyring").
    public var kernelKeyringTTL: Int = 30 * 86_400
    /// Seconds without a connection, request or sign-in after which a socket-activated
    /// daemon exits (systemd starts it again on the next connection); 0 = never.
    public var idleExit: Int = 0
    /// Seconds a started request line may take to finish before the connection is closed.
    public var requestLineTimeout: Int = 10
    /// Seconds a connection may sit with nothing to do before it is closed.
    public var connectionIdleTimeout: Int = 300
    /// Connections served at once; more are refused with -32009.
    public var maxConnections: Int = 4096
    /// Requests worked on at once (refreshes, sign-ins, …) by all connections together;
    /// more are refused with -32009. Each connection has at most
    /// `maxRequestsInFlightPerConnection` and is not read from while it has that many.
    public var maxRequestsInFlight: Int = 1024
    /// Requests one connection may make in a minute that the cache cannot answer (each may
    /// cost a request to the provider); more are refused with -32009 until the allowance
    /// refills, evenly over the minute. 0 = no limit.
    public var cacheMissesPerMinute: Int = 120
    /// Requests of one connection worked on at once; more wait unread in the socket.
    public static let maxRequestsInFlightPerConnection = 64

    public init(store: StoreKind = .secretService, refreshMargin: Int = 60, storeTimeout: Int = 10, httpTimeout: Int = 10) {
        self.store = store
        self.refreshMargin = refreshMargin
        self.storeTimeout = storeTimeout
        self.httpTimeout = httpTimeout
    }
}

/// How a provider's tokens are obtained.
public enum ProviderGrant: String, Sendable, Equatable {
    /// A user signs in (browser or device); refresh tokens mint access tokens.
    case user = "authorization_code"
    /// A machine account: the client credentials grant, no sign-in at all.
    case clientCredentials = "client_credentials"
}

/// `access_tokens`: what a refresh does to the access tokens issued before it.
public enum AccessTokenRule: String, Sendable, Equatable {
    /// Every access token lives until it expires, whatever is refreshed after it.
    case independent
    /// The provider keeps one live access token per refresh-token chain: each refresh
    /// revokes the access token the previous refresh of that chain issued (Ory Hydra does).
    /// The default, because serving a revoked token fails silently, while assuming it
    /// costs only a refresh when one account switches between resources or scope sets.
    case onePerRefreshToken = "one-per-refresh-token"
}

/// `refresh_tokens`: one refresh token for all of an account's resources, or one each.
public enum RefreshTokenRule: String, Sendable, Equatable {
    /// One refresh token serves every resource of the account.
    case shared
    /// One refresh token per configured resource, each from its own sign-in, for providers
    /// that narrow a rotated refresh token to the one resource it was used for (Glewlwyd).
    case onePerResource = "one-per-resource"
}

/// `[providers.NAME]`.
public struct ProviderConfig: Sendable, Equatable {
    public var name: String
    public var issuer: String
    public var clientID: String
    /// Confidential clients only; never logged or shown.
    public var clientSecret: String?
    public var scopes: [String]
    /// RFC 8707 resources asked for at sign-in; `token.get` serves these (and the default
    /// audience) only, unless `anyResource`.
    public var resources: [String]
    /// `any_resource = true`: serve tokens for any resource a caller names, not only those
    /// in `resources` (each new one costs a request to the provider).
    public var anyResource = false
    /// `resource` (RFC 8707) or `audience` for providers that predate it.
    public var audienceParameter: String
    /// How tokens are obtained: for a user who signs in, or for the client itself.
    public var grant: ProviderGrant = .user
    /// Extra authorization parameters for every browser sign-in (`prompt`, `acr_values`, …).
    public var authorizationParams: [String: String] = [:]
    /// `consent_for_offline_access`: a browser sign-in that asks for `offline_access` and
    /// sets no `prompt` of its own sends `prompt=consent` (OpenID Connect Core §11: a client
    /// asking for offline access must, unless the provider has other grounds to allow it).
    /// `false` for providers that grant it without a consent page (docs/providers.md).
    public var consentForOfflineAccess = true
    /// `revoke_replaced_sign_in`: a new sign-in of an account revokes the refresh token it
    /// replaces (RFC 7009), which nobody needs any more and anyone who copied it could still
    /// use. `false` for providers whose revocation ends every sign-in of the user at the
    /// client, the new one included (docs/providers.md).
    public var revokeReplacedSignIn = true

    /// Providers known to end the user's whole grant (every sign-in of the client, the new
    /// one too) when one refresh token is revoked: Keycloak (`/realms/NAME` issuers) and
    /// Google. `revoke_replaced_sign_in` defaults to false for them.
    public static func revocationEndsTheGrant(issuer: String) -> Bool {
        issuer.contains("/realms/") || issuer.hasPrefix("https://accounts.google.com")
    }
    /// A fixed port for the loopback redirect, for providers that match redirect URIs
    /// exactly (RFC 8252 asks them not to); nil = an ephemeral port.
    public var redirectPort: Int? = nil
    /// Where the provider sends the browser after RP-initiated logout.
    public var postLogoutRedirectURI: String? = nil
    /// Endpoints set in config.toml, for providers whose discovery document lists fewer
    /// than they serve; each one set wins over discovery.
    public var endpoints = ConfiguredEndpoints()
    /// The DPoP (RFC 9449) proof algorithm, or nil for bearer tokens (docs/dpop.md).
    public var dpop: JWSAlgorithm? = nil
    /// `authctl login --terminal` may use the resource owner password grant (OAuth 2.1
    /// drops it) when the provider offers no authorization challenge endpoint.
    public var passwordGrant = false
    /// Parameters sent on every token request (`token_params`), before a caller's own.
    public var tokenParams: [String: String] = [:]
    /// Whether a refresh revokes the access tokens issued before it (docs/providers.md).
    public var accessTokens: AccessTokenRule = .onePerRefreshToken
    /// One refresh token for every resource, or one per resource (docs/providers.md).
    public var refreshTokens: RefreshTokenRule = .shared
    /// Tokens asked for within `refreshAheadWindow` seconds are refreshed in the background
    /// before `refresh_margin` would make a caller wait (`refresh_ahead`).
    public var refreshAhead = false
    /// How recently a token must have been asked for to be refreshed ahead, in seconds.
    public var refreshAheadWindow = 600
    /// `scope_sets`: the scope sets (sorted, no duplicates) callers may name; nil: any set
    /// of the configured `scopes` (a refresh may narrow what the sign-in granted).
    public var scopeSets: [[String]]? = nil
    /// `any_scopes = true`: callers may name any scopes at all.
    public var anyScopes = false
    /// `caller_params`: the names callers may set in `params`; none by default.
    public var callerParams: [String] = []
    /// `max_tokens_per_account`: live tokens one account may hold for distinct resources,
    /// scope sets, params and exchange targets.
    public var maxTokensPerAccount = 64
    /// Seconds for which the provider still honours a refresh token it has just rotated
    /// (`refresh_token_reuse_grace`; 0 = it does not). Within it, a refresh that got no
    /// answer is sent once more with the same refresh token (docs/security.md).
    public var refreshTokenReuseGrace = 0
    /// `default_account`: the account (a username, display name or subject) of a request
    /// that names none while several are signed in and no account rule matched.
    public var defaultAccount: String? = nil
    /// `[[providers.NAME.accounts]]`: the rules that choose the account of a request that
    /// names none from the caller's context, first match first (docs/configuration.md).
    public var accountRules: [AccountRule] = []
    /// Whether a rule needs the caller's working directory (read on the slow path only).
    public var accountRulesNeedDirectory: Bool { accountRules.contains { $0.needsDirectory } }
    /// Set for a provider found by resource-first discovery (not in config.toml): how its
    /// client was obtained, and the registration's management credentials.
    public var discovered: DiscoveredOrigin? = nil

    public static let defaultScopes = ["openid", "profile", "email", "offline_access"]

    public init(name: String, issuer: String, clientID: String, clientSecret: String? = nil,
                scopes: [String] = ProviderConfig.defaultScopes, resources: [String] = [],
                audienceParameter: String = "resource") {
        self.name = name
        self.issuer = issuer
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.scopes = scopes
        self.resources = resources
        self.audienceParameter = audienceParameter
    }

    /// True when callers may ask for `scopes` (none: the provider's default). Cheap for the
    /// usual request, which names none.
    public func allows(scopes: [String]) -> Bool {
        if scopes.isEmpty || anyScopes { return true }
        if let scopeSets { return scopeSets.contains(CacheKey.normalized(scopes)) }
        return scopes.allSatisfy(self.scopes.contains)
    }

    /// True when callers may set extra parameters of these names.
    public func allows(paramNames: some Collection<String>) -> Bool {
        paramNames.allSatisfy(callerParams.contains)
    }

    /// True when `token.get` may ask the provider for `resource` (nil: the default audience).
    public func serves(resource: String?) -> Bool {
        guard let resource else { return true }
        return anyResource || resources.contains(resource)
    }
}

extension ProviderConfig {
    /// Whether tokens cached under `self` are what `other` would get too: the settings that
    /// decide how a token is asked for and what it is are the same (the sign-in's own
    /// settings, a post-logout page, refresh-ahead or the limits do not count). A resource
    /// no longer listed is a change: its tokens must not be served on.
    func mintsAlike(_ other: ProviderConfig) -> Bool {
        issuer == other.issuer && clientID == other.clientID && clientSecret == other.clientSecret
            && Set(resources).isSubset(of: Set(other.resources)) && anyResource == other.anyResource
            && audienceParameter == other.audienceParameter && grant == other.grant && dpop == other.dpop
            && tokenParams == other.tokenParams && accessTokens == other.accessTokens && refreshTokens == other.refreshTokens
            && endpoints == other.endpoints && scopes == other.scopes && scopeSets == other.scopeSets
            && anyScopes == other.anyScopes && callerParams == other.callerParams && discovered == other.discovered
    }
}

/// The endpoint keys of `[providers.NAME]` (docs/providers.md). Each is checked like the
/// issuer when the file is read: https, or http on a loopback host.
public struct ConfiguredEndpoints: Sendable, Equatable {
    public var deviceAuthorization: String?
    public var revocation: String?
    public var userinfo: String?
    public var endSession: String?
    public var introspection: String?
    public var authorizationChallenge: String?

    public init() {}

    /// The config keys, with the member each one sets.
    static var keys: [(String, WritableKeyPath<ConfiguredEndpoints, String?>)] { [
        ("device_authorization_endpoint", \.deviceAuthorization), ("revocation_endpoint", \.revocation),
        ("userinfo_endpoint", \.userinfo), ("end_session_endpoint", \.endSession),
        ("introspection_endpoint", \.introspection),
        ("authorization_challenge_endpoint", \.authorizationChallenge),
    ] }

    /// The discovery document with the configured endpoints filled in or put in its place.
    func applied(to metadata: ProviderMetadata) -> ProviderMetadata {
        var m = metadata
        if let deviceAuthorization { m.deviceAuthorizationEndpoint = deviceAuthorization }
        if let revocation { m.revocationEndpoint = revocation }
        if let userinfo { m.userinfoEndpoint = userinfo }
        if let endSession { m.endSessionEndpoint = endSession }
        if let introspection { m.introspectionEndpoint = introspection }
        if let authorizationChallenge { m.authorizationChallengeEndpoint = authorizationChallenge }
        return m
    }
}
