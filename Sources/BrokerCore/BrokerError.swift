/// Why the broker could not do what was asked. Each case carries the one sentence a user
/// reads, saying what to do next. None ever holds a token, secret, code or verifier.
public enum BrokerError: Error, Sendable, Equatable {
    /// The account must sign in again (or never has).
    case loginRequired(provider: String, message: String)
    /// The provider answered with an OAuth error.
    case providerError(provider: String, oauthError: String, message: String)
    /// The provider could not be reached or answered nonsense; retry after the hint.
    case providerUnreachable(provider: String, retryAfter: Int, message: String)
    /// The Secret Service is absent, locked or not answering; `reason` is the kind
    /// (`unavailable`, `locked`, `timed_out`, `failed`) when it is known.
    case storeUnavailable(message: String, reason: String? = nil)
    /// No such provider, or none named when several are configured.
    case unknownProvider(message: String)
    /// The request is well-formed JSON-RPC but asks for something that cannot be.
    case invalidRequest(message: String)
    /// A sign-in failed: refused, expired, or an unknown login id.
    case loginFailed(provider: String?, message: String)
    /// The caller policy does not grant this to this caller.
    case forbidden(message: String)
    /// Too many of something at once.
    case overloaded(message: String)
    /// The caller's requests made the daemon ask the providers `limit` times within a
    /// minute (`cache_misses_per_minute`, `ProviderRequests`): nothing was sent this time.
    case providerRequestsSpent(limit: Int, retryAfter: Int)
    /// config.toml (or the provider's discovery document it relies on) does not allow
    /// this: not the provider's refusal, and retrying will not help until the file changes.
    case configuration(provider: String?, message: String)
    /// A resource's metadata names an authorization server the user has not trusted:
    /// nothing was sent to it (docs/security.md, "Discovery").
    case untrustedServer(resource: String, issuer: String, provider: String, resourceHost: String, issuerHost: String, why: String = "")
    case internalError(String)

    public var message: String {
        switch self {
        case .loginRequired(_, let m), .providerError(_, _, let m), .providerUnreachable(_, _, let m),
             .storeUnavailable(let m, _), .unknownProvider(let m), .invalidRequest(let m),
             .loginFailed(_, let m), .forbidden(let m), .overloaded(let m), .configuration(_, let m), .internalError(let m):
            return m
        case .untrustedServer(let resource, _, _, let resourceHost, let issuerHost, let why):
            let reason = why.isEmpty ? "" : " (\(why))"
            return "\(resourceHost) sends its users to sign in at \(issuerHost), which you have not trusted yet\(reason): run `authctl login --resource \(resource)` to review it and sign in"
        case .providerRequestsSpent(let limit, let wait):
            return "this connection made authbrokerd ask the provider for \(limit) tokens within a minute (cache_misses_per_minute): try again in \(wait) s"
        }
    }

    /// The same error with a clause added to its sentence (what became of the tokens).
    func appending(_ clause: String) -> BrokerError {
        switch self {
        case .loginFailed(let p, let m): return .loginFailed(provider: p, message: "\(m); \(clause)")
        case .providerError(let p, let c, let m): return .providerError(provider: p, oauthError: c, message: "\(m); \(clause)")
        case .providerUnreachable(let p, let r, let m): return .providerUnreachable(provider: p, retryAfter: r, message: "\(m); \(clause)")
        case .configuration(let p, let m): return .configuration(provider: p, message: "\(m); \(clause)")
        default: return self
        }
    }

    static func notSignedIn(_ provider: String) -> BrokerError {
        .loginRequired(provider: provider, message: "not signed in to \(provider): run `authctl login --provider \(provider)`")
    }

    static func signInAgain(_ provider: String, _ who: String) -> BrokerError {
        .loginRequired(provider: provider, message: "the sign-in of \(who) at \(provider) is no longer valid: run `authctl login --provider \(provider)`")
    }
}
