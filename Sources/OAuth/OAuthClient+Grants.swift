import BrokerCrypto
/// The token grants other than the device flow, and revocation.
extension OAuthClient {
    /// Trades a refresh token for new tokens (RFC 6749 §6), optionally narrowed to one
    /// resource (RFC 8707) and to `scopes` (omitted when nil or empty). `extra` holds
    /// parameters already checked against `TokenRequestParameters.reservedParameters`.
    /// With `keepingRefreshToken`, an answer whose access token cannot be used but that
    /// carries a new refresh token is returned with `unusable` set (`TokenResponse`).
    /// `timeout` and `answerTimeout` as in `HTTPRequest`.
    public func refresh(_ metadata: ProviderMetadata, refreshToken: String, resource: String?,
                        scopes: [String]?, extra: [(String, String)] = [], timeout: Double? = nil,
                        answerTimeout: Double? = nil, keepingRefreshToken: Bool = false) async throws(OAuthError) -> TokenResponse {
        try await tokenRequest(metadata, [("grant_type", "refresh_token"), ("refresh_token", refreshToken)]
            + resourceAndScope(resource, scopes) + extra, timeout: timeout, answerTimeout: answerTimeout,
                               keepingRefreshToken: keepingRefreshToken)
    }

    /// Gets tokens for the client itself (RFC 6749 §4.4), for machine accounts. Needs a
    /// client secret.
    public func clientCredentials(_ metadata: ProviderMetadata, resource: String?,
                                  scopes: [String]?, extra: [(String, String)] = []) async throws(OAuthError) -> TokenResponse {
        guard configuration.clientSecret != nil else {
            throw .configuration("client \(configuration.clientID) has no client secret, which the client credentials grant needs")
        }
        return try await tokenRequest(metadata, [("grant_type", "client_credentials")] + resourceAndScope(resource, scopes) + extra)
    }

    /// The resource owner password credentials grant (RFC 6749 §4.3), which OAuth 2.1 drops:
    /// only for providers configured with `password_grant = true`. Like any sign-in it asks
    /// for every resource the grant is for (RFC 8707 allows several).
    /// The password is form-encoded straight into the request body, which is wiped once
    /// the request is sent (`secret`): no String of it is made.
    public func password(_ metadata: ProviderMetadata, username: String, password: SecretBytes,
                         scopes: [String], resources: [String]) async throws(OAuthError) -> TokenResponse {
        let response = try await postForm([("grant_type", "password"), ("username", username)]
                                              + resources.map { (configuration.audienceParameter, $0) } + resourceAndScope(nil, scopes),
                                          secret: ("password", password), to: metadata.tokenEndpoint, name: "token endpoint",
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported)
        return try ProviderAnswer.tokens(ProviderAnswer.object(response, place: "token endpoint", sent: secrets(in: []),
                                                               typed: password))
    }

    /// Redeems an authorization code with its PKCE verifier (RFC 6749 §4.1.3, RFC 7636 §4.5).
    /// `redirectURI` is nil for a code from the authorization challenge endpoint, whose
    /// request had none.
    public func exchangeCode(_ metadata: ProviderMetadata, code: String, redirectURI: String?,
                             codeVerifier: String, resource: String?) async throws(OAuthError) -> TokenResponse {
        try await tokenRequest(metadata, [("grant_type", "authorization_code"), ("code", code)]
            + (redirectURI.map { [("redirect_uri", $0)] } ?? [])
            + [("code_verifier", codeVerifier)] + resourceAndScope(resource, nil))
    }

    /// Revokes `token` (RFC 7009 §2.1); `tokenTypeHint` is `refresh_token` or `access_token`.
    ///
    /// Returns true when the provider answered 200, which RFC 7009 also gives for a token
    /// that was already invalid: either way the token no longer works. Returns false when
    /// the provider declines to revoke tokens of this type (`unsupported_token_type`): the
    /// token still works until it expires. Throws `.configuration` when the provider has
    /// no revocation endpoint, and the usual errors when the request fails.
    @discardableResult
    public func revoke(_ metadata: ProviderMetadata, token: String, tokenTypeHint: String) async throws(OAuthError) -> Bool {
        guard let endpoint = metadata.revocationEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no revocation endpoint")
        }
        let response = try await postForm([("token", token), ("token_type_hint", tokenTypeHint)], to: endpoint,
                                          name: "revocation endpoint",
                                          authMethods: metadata.revocationEndpointAuthMethodsSupported
                                              ?? metadata.tokenEndpointAuthMethodsSupported)
        guard response.status != 200 else { return true }
        do {
            _ = try ProviderAnswer.object(response, place: "revocation endpoint", sent: secrets(in: [("token", token)]))
            return true
        } catch {
            if case .provider(oauthCode: "unsupported_token_type", _, _) = error { return false }
            throw error
        }
    }
}
