/// RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0 §2).
extension OAuthClient {
    /// The URL that ends the user's session at the provider, or nil when the provider has
    /// no `end_session_endpoint`.
    ///
    /// It carries `client_id` and `logout_hint`, never `id_token_hint`: the URL is shown to
    /// the user and passed to a browser, and no token may appear in any output. Without the
    /// hint the provider may ask the user to confirm, which is the spec's intent (§2). The
    /// hint goes in `endSessionForm`, which only the browser sees.
    public func endSessionURL(_ metadata: ProviderMetadata, logoutHint: String?, postLogoutRedirectURI: String?) -> String? {
        guard let endpoint = metadata.endSessionEndpoint else { return nil }
        let query = String(decoding: FormEncoding.encode(endSessionFields(logoutHint: logoutHint, postLogoutRedirectURI: postLogoutRedirectURI)), as: UTF8.self)
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }

    /// The same request with the account's last ID token as `id_token_hint`, as a form the
    /// browser sends from the daemon's sign-out page, so that the token is in no output:
    /// the endpoint (the form's action) and its fields; nil without an `end_session_endpoint`.
    public func endSessionForm(_ metadata: ProviderMetadata, idTokenHint: String, logoutHint: String?,
                               postLogoutRedirectURI: String?) -> (action: String, fields: [(String, String)])? {
        guard let endpoint = metadata.endSessionEndpoint else { return nil }
        let fields = [("id_token_hint", idTokenHint)] + endSessionFields(logoutHint: logoutHint, postLogoutRedirectURI: postLogoutRedirectURI)
        return (endpoint, fields)
    }

    private func endSessionFields(logoutHint: String?, postLogoutRedirectURI: String?) -> [(String, String)] {
        var pairs: [(String, String)] = [("client_id", configuration.clientID)]
        if let logoutHint { pairs.append(("logout_hint", logoutHint)) }
        if let postLogoutRedirectURI { pairs.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        return pairs
    }
}
