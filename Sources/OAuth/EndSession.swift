/// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0 §2).
extension OAuthClient {
    /// The URL that ends the user's session at the provider, or nil when the provider has
    /// no `end_session_endpoint`.
    ///
    /// It carries `client_id` and `logout_hint`, never `id_token_hint`: the URL is shown to
    /// the user and passed to a browser, and no token may appear in any output. Without the
    /// hint the provider may ask the user to confirm, which is the spec's intent (§2).
    public func endSessionURL(_ metadata: ProviderMetadata, logoutHint: String?, postLogoutRedirectURI: String?) -> String? {
        guard let endpoint = metadata.endSessionEndpoint else { return nil }
        var pairs: [(String, String)] = [("client_id", configuration.clientID)]
        if let logoutHint { pairs.append(("logout_hint", logoutHint)) }
        if let postLogoutRedirectURI { pairs.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        let query = String(decoding: FormEncoding.encode(pairs), as: UTF8.self)
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }
}
