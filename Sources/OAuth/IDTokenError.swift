/// Why an ID token was refused (OpenID Connect Core §3.1.3.7). Each check of
/// `IDTokenVerifier` has its own `reason`, so callers and tests can tell a forged
/// signature from an expired token; `message` is the sentence for the user. Neither ever
/// holds the token itself.
public struct IDTokenError: Error, Sendable, Equatable {
    /// Which check failed, in the order they are made.
    public enum Reason: String, Sendable, Equatable, CaseIterable {
        /// Not a compact JWS: three base64url segments, a JSON object header, no `crit`.
        case malformed
        /// The header's `alg` is missing or not on the allow-list (`none`, HS256, …).
        case algorithmNotAllowed
        /// The provider's keys could not be fetched or read (see `underlying`).
        case keysUnavailable
        /// The header's `kid` names no key of the provider, even after fetching the keys again.
        case unknownKeyID
        /// The key named by `kid` does not fit the header's `alg` (type, curve, its own
        /// `alg`, `use`), or is not a valid key.
        case keyDoesNotFitAlgorithm
        /// No `kid`, and not exactly one of the provider's keys fits the algorithm.
        case noSuitableKey
        /// The signature does not verify with the chosen key.
        case badSignature
        /// The payload is not a JSON object with the claims an ID token must have (`sub`).
        case invalidClaims
        /// `iss` is not exactly the provider's issuer.
        case wrongIssuer
        /// `aud` does not contain this client.
        case wrongAudience
        /// Several audiences and no `azp`.
        case missingAuthorizedParty
        /// `azp` names another client.
        case wrongAuthorizedParty
        /// `exp` is missing or past, beyond the allowed clock skew.
        case expired
        /// `iat` is missing or in the future, beyond the allowed clock skew.
        case issuedInFuture
        /// A nonce was sent with the request but the token has none.
        case missingNonce
        /// The token's nonce is not the request's.
        case wrongNonce
    }

    /// Which check failed.
    public var reason: Reason
    /// A sentence fit for a user.
    public var message: String
    /// For `keysUnavailable`: the failure of the JWKS request.
    public var underlying: OAuthError?
    /// For `expired` and `issuedInFuture` when the claim is there: the token's time (`exp`
    /// or `iat`) minus the host's, in seconds, beyond the allowed skew. A clock's fault,
    /// which the caller can tell apart from a token without the claim.
    public var clockDifference: Double?

    /// Makes an error.
    public init(_ reason: Reason, _ message: String, underlying: OAuthError? = nil, clockDifference: Double? = nil) {
        self.reason = reason
        self.message = message
        self.underlying = underlying
        self.clockDifference = clockDifference
    }

    /// The same failure as an `OAuthError`, for callers that report those: the JWKS
    /// request's own error when the keys could not be fetched, otherwise
    /// `.invalidResponse(message)`.
    public var oauthError: OAuthError {
        underlying ?? .invalidResponse(message)
    }
}
