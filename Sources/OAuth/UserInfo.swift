import BrokerProtocol

/// The UserInfo endpoint (OpenID Connect Core §5.3) and token introspection (RFC 7662):
/// who holds an access token, for answers that carry no ID token.
extension OAuthClient {
    /// The claims the provider returns for the holder of `accessToken`. With `subject` (the
    /// ID token's `sub`), an answer about anyone else is refused (§5.3.2); without it, the
    /// answer must name a `sub`. A `tokenType` of "DPoP" sends the token with that scheme;
    /// the client's `DPoPTransport` adds the proof.
    public func userinfo(_ metadata: ProviderMetadata, accessToken: String, subject: String?,
                         tokenType: String = "Bearer") async throws(OAuthError) -> [String: JSONValue] {
        guard let endpoint = metadata.userinfoEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no userinfo endpoint")
        }
        try EndpointPolicy.check(endpoint, what: "the provider's userinfo endpoint")
        let response = try await transport.send(HTTPRequest(
            method: "GET", url: endpoint,
            headers: ["Authorization": "\(tokenType == "DPoP" ? "DPoP" : "Bearer") \(accessToken)", "Accept": "application/json"]))
        if response.status == 401 || response.status == 403 {
            throw .provider(oauthCode: "invalid_token", description: "the userinfo endpoint refused the access token", httpStatus: response.status)
        }
        let claims = try ProviderAnswer.object(response, place: "userinfo endpoint", sent: [accessToken])
        guard let sub = claims["sub"]?.stringValue, !sub.isEmpty else {
            throw .invalidResponse("the provider's userinfo answer names no subject (sub)")
        }
        if let subject, sub != subject {
            throw .invalidResponse("the provider's userinfo answer is about another subject than the signed-in account")
        }
        return claims
    }

    /// The subject an access token was issued to, by RFC 7662 introspection with the
    /// client's credentials. Nil when the provider calls the token inactive, names no
    /// `sub`, or says it was issued to another client.
    public func introspectSubject(_ metadata: ProviderMetadata, accessToken: String) async throws(OAuthError) -> String? {
        guard let endpoint = metadata.introspectionEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no introspection endpoint")
        }
        let response = try await postForm([("token", accessToken), ("token_type_hint", "access_token")], to: endpoint,
                                          name: "introspection endpoint",
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported)
        let answer = try ProviderAnswer.object(response, place: "introspection endpoint", sent: secrets(in: [("token", accessToken)]))
        guard answer["active"] == .bool(true), let sub = answer["sub"]?.stringValue, !sub.isEmpty else { return nil }
        if let client = answer["client_id"]?.stringValue, client != configuration.clientID { return nil }
        if let iss = answer["iss"]?.stringValue, iss != configuration.issuer { return nil }
        return sub
    }
}
