/// Why the broker could not do what was asked. Each case carries the one sentence a user
/// reads, saying what to do next. None ever holds a token, secret, code or verifier.
public enum BrokerError: Error, Sendable, Equatable {
    /// The account must sign in again (or never has).
    case loginRequired(provider: String, message: String)
    /// The provider answered with an OAuth error.
    case providerError(provider: String, oauthError: String, message: String)
    /// The provider could not be reached or answered nonsense; retry after the hint.
    case providerUnreachable(provider: String, retryAfter: Int, message: String)
    /// The Secret Service is absent, locked or not answering.
    case storeUnavailable(message: String)
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
    case internalError(String)

    public var message: String {
        switch self {
        case .loginRequired(_, let m), .providerError(_, _, let m), .providerUnreachable(_, _, let m),
             .storeUnavailable(let m), .unknownProvider(let m), .invalidRequest(let m),
             .loginFailed(_, let m), .forbidden(let m), .overloaded(let m), .internalError(let m):
            return m
        }
    }

    static func notSignedIn(_ provider: String) -> BrokerError {
        .loginRequired(provider: provider, message: "not signed in to \(provider): run `authctl login --provider \(provider)`")
    }

    static func signInAgain(_ provider: String, _ who: String) -> BrokerError {
        .loginRequired(provider: provider, message: "the sign-in of \(who) at \(provider) is no longer valid: run `authctl login --provider \(provider)`")
    }
}
