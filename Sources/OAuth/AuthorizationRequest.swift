/// An authorization request for the code flow with PKCE (RFC 6749 §4.1.1, RFC 7636 §4.3,
/// OIDC Core §3.1.2.1, RFC 8707 §2, RFC 8252 §7.3).
public struct AuthorizationRequest: Sendable {
    /// Parameters the protocol owns: a caller's extra parameters may never set them.
    public static let reservedParameters: Set<String> = [
        "client_id", "response_type", "redirect_uri", "state", "scope", "response_mode",
        "code_challenge", "code_challenge_method", "nonce", "request", "request_uri",
    ]

    public var clientID: String
    public var redirectURI: String
    public var scopes: [String]
    public var state: String
    public var nonce: String
    public var pkce: PKCE
    public var resources: [String]
    public var audienceParameter: String
    /// Extra parameters (`login_hint`, `prompt`, `acr_values`, `max_age`, `ui_locales`, …),
    /// already checked against `reservedParameters`.
    public var extra: [(String, String)]

    public init(clientID: String, redirectURI: String, scopes: [String], state: String, nonce: String,
                pkce: PKCE, resources: [String], audienceParameter: String, extra: [(String, String)]) {
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.scopes = scopes
        self.state = state
        self.nonce = nonce
        self.pkce = pkce
        self.resources = resources
        self.audienceParameter = audienceParameter
        self.extra = extra
    }

    /// The parameter names of `extra` that the protocol owns, for a clear refusal.
    public static func reserved(in names: some Sequence<String>) -> [String] {
        names.filter { reservedParameters.contains($0) }.sorted()
    }

    /// The URL the user opens: the endpoint with the parameters appended to its query.
    public func url(endpoint: String) -> String {
        var pairs: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("scope", scopes.joined(separator: " ")), ("state", state), ("nonce", nonce),
            ("code_challenge", pkce.challenge), ("code_challenge_method", PKCE.method),
        ]
        pairs += resources.map { (audienceParameter, $0) }
        pairs += extra
        let query = String(decoding: FormEncoding.encode(pairs), as: UTF8.self)
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }
}
