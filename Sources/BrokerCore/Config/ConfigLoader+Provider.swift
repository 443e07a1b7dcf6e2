import OAuth
import TOML

/// One `[providers.NAME]` table: who the provider is and which client the daemon is at
/// it (here), how a sign-in goes (`signInChoices`), what its tokens allow
/// (`tokenRules`), what callers may choose (`callerChoices`) and the accounts
/// (`accountChoice`). docs/configuration.md names every key.
extension TableReader {
    static let providerKeys: Set<String> = [
        "issuer", "client_id", "client_secret", "scopes", "resources", "audience_parameter",
        "grant", "authorization_params", "redirect_port", "post_logout_redirect_uri",
        "dpop", "token_params", "any_resource", "password_grant",
        "access_tokens", "refresh_tokens", "refresh_ahead", "refresh_ahead_window",
        "scope_sets", "any_scopes", "caller_params", "max_tokens_per_account",
        "refresh_token_reuse_grace", "consent_for_offline_access", "revoke_replaced_sign_in",
        "default_account", "accounts",
    ]

    func provider(_ t: TOMLTable, name: String, at key: String) throws(ConfigError) -> ProviderConfig {
        try checkKeys(t, allowed: Self.providerKeys.union(ConfiguredEndpoints.keys.map(\.0)), at: key)
        guard !name.isEmpty else {
            throw fail(key, "a provider needs a name: write [providers.NAME] with letters, digits, '-', '_' or '.' in NAME")
        }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) else {
            throw fail(key, "provider names may hold letters, digits, '-', '_' and '.' only")
        }
        guard let issuer = try string(t, "issuer", at: key) else {
            throw fail("\(key).issuer", "is missing: set it to the provider's issuer URL (discovery is at issuer + /.well-known/openid-configuration)")
        }
        // The rule discovery applies (https, http on a loopback host only, no query or
        // fragment), checked here so that a daemon never starts, nor a reload takes effect,
        // with an issuer no sign-in could use.
        do throws(OAuthError) {
            try EndpointPolicy.checkIssuer(issuer, what: "the issuer")
        } catch {
            throw fail("\(key).issuer", error.message + ": set it to the provider's https:// issuer URL, exactly as its discovery document names it")
        }
        guard let clientID = try string(t, "client_id", at: key), !clientID.isEmpty else {
            throw fail("\(key).client_id", "is missing: set it to the client id registered at the provider")
        }
        let scopes = try strings(t, "scopes", at: key) ?? ProviderConfig.defaultScopes
        let resources = try strings(t, "resources", at: key) ?? []
        for r in resources where !(r.hasPrefix("https://") || r.hasPrefix("http://") || r.contains(":")) {
            throw fail("\(key).resources", "\"\(r)\" is not an absolute URI (RFC 8707 §2)")
        }
        let audience = try string(t, "audience_parameter", at: key) ?? "resource"
        guard audience == "resource" || audience == "audience" else {
            throw fail("\(key).audience_parameter", "must be \"resource\" or \"audience\", not \"\(audience)\"")
        }
        var provider = ProviderConfig(
            name: name, issuer: issuer, clientID: clientID,
            clientSecret: try string(t, "client_secret", at: key),
            scopes: scopes, resources: resources, audienceParameter: audience)
        try signInChoices(t, into: &provider, at: key)
        try tokenRules(t, into: &provider, at: key)
        try callerChoices(t, into: &provider, at: key)
        try accountChoice(t, into: &provider, at: key)
        // A client_credentials provider without client_secret here takes the one stored with
        // `authctl set-secret`; until there is one, its token requests say to store it.
        return provider
    }

    /// How a sign-in goes: the grant, what the authorization and token requests carry,
    /// DPoP, the redirect, endpoints set by hand, and what happens to the sign-in replaced.
    func signInChoices(_ t: TOMLTable, into provider: inout ProviderConfig, at key: String) throws(ConfigError) {
        if let g = try string(t, "grant", at: key) {
            guard let grant = ProviderGrant(rawValue: g) else {
                throw fail("\(key).grant", "must be \"authorization_code\" or \"client_credentials\", not \"\(g)\"")
            }
            provider.grant = grant
        }
        if let params = try parameters(t, "authorization_params", at: key, reserved: AuthorizationRequest.reserved(in:)) {
            provider.authorizationParams = params
        }
        provider.consentForOfflineAccess = try optionalFlag(t, "consent_for_offline_access", at: key) ?? provider.consentForOfflineAccess
        // Keycloak's revocation ends every session of the client for the user, and Google's
        // the whole grant: at those the new sign-in would die with the old refresh token.
        provider.revokeReplacedSignIn = try optionalFlag(t, "revoke_replaced_sign_in", at: key)
            ?? !ProviderConfig.revocationEndsTheGrant(issuer: provider.issuer)
        provider.dpop = try dpop(t, at: key)
        provider.passwordGrant = try optionalFlag(t, "password_grant", at: key) ?? provider.passwordGrant
        if let params = try parameters(t, "token_params", at: key, reserved: TokenRequestParameters.reserved(in:)) {
            provider.tokenParams = params
        }
        provider.redirectPort = try int(t, "redirect_port", at: key, range: 1024...65535)
        provider.postLogoutRedirectURI = try string(t, "post_logout_redirect_uri", at: key)
        for (name, member) in ConfiguredEndpoints.keys {
            guard let url = try string(t, name, at: key) else { continue }
            do throws(OAuthError) {
                try EndpointPolicy.check(url, what: "the URL")
            } catch {
                throw fail("\(key).\(name)", error.message)
            }
            provider.endpoints[keyPath: member] = url
        }
    }

    /// What the provider's tokens allow: whether access tokens outlive the refresh that
    /// replaced them, refresh tokens per resource, any resource, refreshing ahead, and
    /// the combinations that cannot work together.
    func tokenRules(_ t: TOMLTable, into provider: inout ProviderConfig, at key: String) throws(ConfigError) {
        if let v = try string(t, "access_tokens", at: key) {
            guard let rule = AccessTokenRule(rawValue: v) else {
                throw fail("\(key).access_tokens", "must be \"one-per-refresh-token\" or \"independent\", not \"\(v)\"")
            }
            provider.accessTokens = rule
        }
        if let v = try string(t, "refresh_tokens", at: key) {
            guard let rule = RefreshTokenRule(rawValue: v) else {
                throw fail("\(key).refresh_tokens", "must be \"shared\" or \"one-per-resource\", not \"\(v)\"")
            }
            provider.refreshTokens = rule
        }
        if provider.refreshTokens == .onePerResource && provider.dpop != nil {
            // Each sign-in makes its own DPoP key; one account holds one.
            throw fail("\(key).refresh_tokens", "\"one-per-resource\" cannot be combined with dpop yet: choose one")
        }
        provider.anyResource = try optionalFlag(t, "any_resource", at: key) ?? provider.anyResource
        provider.refreshAhead = try optionalFlag(t, "refresh_ahead", at: key) ?? provider.refreshAhead
        provider.refreshAheadWindow = try int(t, "refresh_ahead_window", at: key, range: 60...86_400) ?? provider.refreshAheadWindow
        provider.refreshTokenReuseGrace = try int(t, "refresh_token_reuse_grace", at: key, range: 0...86_400) ?? 0
        if provider.refreshAhead && provider.accessTokens == .onePerRefreshToken {
            // A refresh there revokes the token programs hold: one in the background would
            // break them mid-use, which is worse than the wait it saves.
            throw fail("\(key).refresh_ahead", "needs access_tokens = \"independent\": with \"one-per-refresh-token\" (the default) every refresh revokes the token programs hold; set access_tokens only if \(provider.name) keeps earlier tokens alive (docs/providers.md), or remove refresh_ahead")
        }
    }

    /// A true-or-false key; nil when absent.
    func optionalFlag(_ t: TOMLTable, _ name: String, at key: String) throws(ConfigError) -> Bool? {
        guard let v = t[name] else { return nil }
        guard let b = v.bool else { throw fail("\(key).\(name)", "must be true or false") }
        return b
    }

    /// A table of string parameters the daemon adds to a request, none of them one it sets
    /// itself; nil when absent.
    func parameters(_ t: TOMLTable, _ name: String, at key: String,
                    reserved: ([String]) -> [String]) throws(ConfigError) -> [String: String]? {
        guard let table = try table(t, name, at: key) else { return nil }
        var params: [String: String] = [:]
        for (param, value) in table {
            guard let s = value.string else { throw fail("\(key).\(name).\(param)", "must be a string") }
            params[param] = s
        }
        let refused = reserved(Array(params.keys))
        if !refused.isEmpty {
            throw fail("\(key).\(name)", "\(refused.joined(separator: ", ")) cannot be set: authbroker sets it itself")
        }
        return params
    }
}
