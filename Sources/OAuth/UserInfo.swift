/// The UserInfo endpoint (OpenID Connect Core §5.3).
extension OAuthClient {
    /// The claims the provider returns for the holder of `accessToken`. `subject` is the ID
    /// token's `sub`: an answer about anyone else is refused (§5.3.2).
    public func userinfo(_ metadata: ProviderMetadata, accessToken: String, subject: String) async throws(OAuthError) -> [String: JSONValue] {
        guard let endpoint = metadata.userinfoEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no userinfo endpoint")
        }
        let response = try await transport.send(HTTPRequest(
            method: "GET", url: endpoint,
            headers: ["Authorization": "Bearer \(accessToken)", "Accept": "application/json"]))
        if response.status == 401 || response.status == 403 {
            throw .provider(oauthCode: "invalid_token", description: "the userinfo endpoint refused the access token", httpStatus: response.status)
        }
        let claims = try ProviderAnswer.object(response, place: "userinfo endpoint")
        guard claims["sub"]?.stringValue == subject else {
            throw .invalidResponse("the provider's userinfo answer is about another subject than the signed-in account")
        }
        return claims
    }
}
