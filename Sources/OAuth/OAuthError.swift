/// Why an OAuth call failed. `message` is a sentence fit for a user; none of the cases
/// ever carries a token, secret or code.
public enum OAuthError: Error, Sendable, Equatable {
    /// No answer: connection refused, DNS, TLS, time-out.
    case unreachable(String)
    /// The provider answered with an OAuth error (RFC 6749 §5.2 `error`), or with an empty
    /// 400, which `oauthCode` then reports as `invalid_grant`.
    case provider(oauthCode: String, description: String?, httpStatus: Int)
    /// The provider answered something that is not a valid answer (5xx, garbage JSON,
    /// missing fields).
    case invalidResponse(String)
    /// The configuration or the discovery document is not acceptable (http on a
    /// non-loopback host, issuer mismatch, missing endpoint).
    case configuration(String)
    /// An endpoint the discovery document named answered HTTP 404: the document may be
    /// out of date, so the caller reads it again.
    case endpointNotFound(String)

    public var message: String {
        switch self {
        case .unreachable(let m), .invalidResponse(let m), .configuration(let m), .endpointNotFound(let m): return m
        case .provider(let code, let description, _):
            if let description, !description.isEmpty { return "the provider answered \(code): \(description)" }
            return "the provider answered \(code)"
        }
    }

    /// True for `invalid_grant`: the refresh token (or device code) is no longer good.
    public var isInvalidGrant: Bool {
        if case .provider(let code, _, _) = self { return code == "invalid_grant" }
        return false
    }

    /// True when the answer to a refresh says the refresh token is no longer good:
    /// `invalid_grant`, or `invalid_request` whose description names the refresh token, as
    /// providers answer for a refresh token they no longer have (Dex: "Refresh token is
    /// invalid or has already been claimed by another client."). An `invalid_request` that
    /// does not name it may be about any other parameter, so it does not count.
    public var refusesRefreshToken: Bool {
        guard case .provider(let code, let description, _) = self else { return false }
        if code == "invalid_grant" { return true }
        return code == "invalid_request" && description?.lowercased().contains("refresh") == true
    }

    /// True when no answer came (no connection, a time-out, a broken answer): the request
    /// may or may not have been carried out by the provider.
    public var isNoAnswer: Bool {
        switch self {
        case .unreachable, .invalidResponse: return true
        case .provider, .configuration, .endpointNotFound: return false
        }
    }
}
