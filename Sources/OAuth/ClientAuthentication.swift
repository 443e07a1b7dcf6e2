import BrokerCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a request proves which client sends it (RFC 6749 §2.3.1).
enum ClientAuthentication: Equatable {
    /// Public client: `client_id` in the body.
    case none
    /// `client_secret_basic`: the `Authorization` header value.
    case basic(String)
    /// `client_secret_post`: `client_id` and `client_secret` in the body.
    case post(secret: String)
}

extension OAuthClient {
    /// Basic unless `methods` (the endpoint's `…_auth_methods_supported`) offers
    /// `client_secret_post` but not `client_secret_basic`.
    func clientAuthentication(methods: [String]?) -> ClientAuthentication {
        guard let secret = configuration.clientSecret else { return .none }
        if let methods, methods.contains("client_secret_post"), !methods.contains("client_secret_basic") {
            return .post(secret: secret)
        }
        let credentials = FormEncoding.escape(configuration.clientID) + ":" + FormEncoding.escape(secret)
        return .basic("Basic " + Data(credentials.utf8).base64EncodedString())
    }

    /// POSTs `parameters` as a form to `endpoint` with client authentication; `name`
    /// names the endpoint in sentences.
    /// A `secret` pair (a typed password) is encoded last, straight into the body, and the
    /// body is wiped once the request is sent. `timeout` and `answerTimeout` as in `HTTPRequest`.
    func postForm(_ parameters: [(String, String)], secret: (String, SecretBytes)? = nil, to endpoint: String, name: String,
                  authMethods: [String]?, timeout: Double? = nil, answerTimeout: Double? = nil) async throws(OAuthError) -> HTTPResponse {
        try EndpointPolicy.check(endpoint, what: "the provider's \(name)")
        var pairs = parameters
        var headers = ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"]
        switch clientAuthentication(methods: authMethods) {
        case .none: pairs.insert(("client_id", configuration.clientID), at: 0)
        case .basic(let value): headers["Authorization"] = value
        case .post(let secret): pairs.insert(contentsOf: [("client_id", configuration.clientID), ("client_secret", secret)], at: 0)
        }
        var body = FormEncoding.encode(pairs)
        guard let (name, value) = secret else {
            return try await transport.send(HTTPRequest(method: "POST", url: endpoint, headers: headers, body: body, timeout: timeout,
                                                    answerTimeout: answerTimeout))
        }
        FormEncoding.append(name: name, secret: value, to: &body)
        // Wiped in its storage once sent, whoever still holds it (the HTTP client's worker
        // thread may let go of it a moment later); the client wipes the bytes it wrote.
        defer { SecretBytes.wipe(body) }
        return try await transport.send(HTTPRequest(method: "POST", url: endpoint, headers: headers, body: body, timeout: timeout,
                                                    answerTimeout: answerTimeout))
    }

    /// Sends a token request and reads the token answer; `timeout` and `answerTimeout` as in
    /// `HTTPRequest`. `keepingRefreshToken` reads the answer with `ProviderAnswer.refreshedTokens`.
    func tokenRequest(_ metadata: ProviderMetadata, _ parameters: [(String, String)], timeout: Double? = nil,
                      answerTimeout: Double? = nil, keepingRefreshToken: Bool = false) async throws(OAuthError) -> TokenResponse {
        let response = try await postForm(parameters, to: metadata.tokenEndpoint, name: "token endpoint",
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported, timeout: timeout,
                                          answerTimeout: answerTimeout)
        let json = try ProviderAnswer.object(response, place: "token endpoint", sent: secrets(in: parameters))
        var tokens = keepingRefreshToken ? try ProviderAnswer.refreshedTokens(json) : try ProviderAnswer.tokens(json)
        if case .date(let date)? = response.headers["date"].flatMap(RetryAfter.init(header:)) { tokens.providerDate = date }
        return tokens
    }

    /// The form parameters whose values are credentials.
    static let secretParameters: Set<String> = [
        "refresh_token", "code", "code_verifier", "device_code", "client_secret", "token", "subject_token",
        "actor_token", "assertion", "client_assertion", "auth_session", "password",
    ]

    /// The credentials a request with `parameters` carries, the client secret included: the
    /// provider's error text never shows them (`ProviderAnswer.redacting`).
    func secrets(in parameters: [(String, String)]) -> [String] {
        parameters.filter { Self.secretParameters.contains($0.0) }.map(\.1) + (configuration.clientSecret.map { [$0] } ?? [])
    }

    /// The optional `resource` (or configured audience parameter) and `scope` pairs.
    func resourceAndScope(_ resource: String?, _ scopes: [String]?) -> [(String, String)] {
        var pairs: [(String, String)] = []
        if let resource { pairs.append((configuration.audienceParameter, resource)) }
        if let scopes, !scopes.isEmpty { pairs.append(("scope", scopes.joined(separator: " "))) }
        return pairs
    }
}
