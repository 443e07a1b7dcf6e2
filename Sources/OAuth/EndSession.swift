/// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0 §2).
extension OAuthClient {
    /// The URL that ends the user's session at the provider, or nil when the provider has
    /// no `end_session_endpoint`. `idTokenHint` tells the provider whose session it is.
    public func endSessionURL(_ metadata: ProviderMetadata, idTokenHint: String?, postLogoutRedirectURI: String?) -> String? {
        guard let endpoint = metadata.endSessionEndpoint else { return nil }
        var pairs: [(String, String)] = [("client_id", configuration.clientID)]
        if let idTokenHint { pairs.append(("id_token_hint", idTokenHint)) }
        if let postLogoutRedirectURI { pairs.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        let query = String(decoding: FormEncoding.encode(pairs), as: UTF8.self)
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }
}
