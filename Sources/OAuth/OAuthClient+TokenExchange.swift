/// OAuth 2.0 Token Exchange (RFC 8693): a token for another service, minted from one the
/// client holds.
extension OAuthClient {
    /// The grant type of RFC 8693 §2.1.
    public static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"

    /// The token type URN (RFC 8693 §3) of a short name: `access_token`, `id_token`,
    /// `refresh_token`, `jwt`. A full URN is returned as it is.
    public static func tokenTypeURN(_ name: String) -> String? {
        switch name {
        case "access_token", "refresh_token", "id_token", "saml1", "saml2": return "urn:ietf:params:oauth:token-type:" + name
        case "jwt": return "urn:ietf:params:oauth:token-type:jwt"
        default: return name.hasPrefix("urn:") ? name : nil
        }
    }

    /// Exchanges `subjectToken` (of type `subjectTokenType`, a URN) at the token endpoint
    /// for a token for `audience` and/or `resource` (RFC 8693 §2.1). The answer's
    /// `token_type` may be "N_A" when the issued token is no access token (§2.2.1).
    public func exchangeToken(_ metadata: ProviderMetadata, subjectToken: String, subjectTokenType: String,
                              requestedTokenType: String?, audience: String?, resource: String?,
                              scopes: [String]?) async throws(OAuthError) -> TokenResponse {
        var form: [(String, String)] = [
            ("grant_type", Self.tokenExchangeGrant),
            ("subject_token", subjectToken), ("subject_token_type", subjectTokenType),
        ]
        if let requestedTokenType { form.append(("requested_token_type", requestedTokenType)) }
        if let audience { form.append(("audience", audience)) }
        // RFC 8693 names the parameter `resource` itself, whatever audience_parameter says.
        if let resource { form.append(("resource", resource)) }
        if let scopes, !scopes.isEmpty { form.append(("scope", scopes.joined(separator: " "))) }
        let response = try await postForm(form, to: metadata.tokenEndpoint, name: "token endpoint",
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported)
        return try ProviderAnswer.tokens(ProviderAnswer.object(response, place: "token endpoint", sent: secrets(in: form)), untyped: true)
    }
}
