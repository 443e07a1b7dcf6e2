import BrokerProtocol
import OAuth

/// Who signed in, for a sign-in's token answer: from its ID token when it has one, else
/// (RFC 8628 does not require one) from the provider's introspection or userinfo
/// endpoint. A sign-in whose account cannot be named is refused and what it issued is
/// revoked, so nothing is left alive at the provider.
struct SignInIdentity: Sendable {
    var subject: String
    var username: String?
    var idToken: String?
    /// Set when finding the identity took a refresh (userinfo refused the sign-in's
    /// audience-restricted token): the rotated refresh token replaces the sign-in's.
    var refreshToken: String?
}

/// The tokens a sign-in has received so far, to revoke if it is refused.
struct IssuedTokens: Sendable {
    var accessTokens: [String]
    var refreshToken: String?
}

extension Broker {
    /// The account behind `tokens`. Throws `.loginFailed` when it cannot be named; the
    /// caller then revokes `issued`.
    func identify(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata, nonce: String?,
                  dpop signer: DPoPSigner?, issued: inout IssuedTokens) async throws(BrokerError) -> SignInIdentity {
        // With DPoP, the sign-in's tokens are bound to its new key: every request proves it.
        let client = provider.client(signer, metadata: metadata, clock: clock)
        if let idToken = tokens.idToken {
            let claims = try await verifyIDToken(idToken, provider: provider, metadata: metadata, nonce: nonce)
            var username = claims.preferredUsername ?? claims.email ?? claims.name
            if username == nil, metadata.userinfoEndpoint != nil {
                // Best effort: the ID token names nobody a person would recognise.
                let claims = try? await client.userinfo(metadata, accessToken: tokens.accessToken, subject: claims.sub,
                                                        tokenType: tokens.tokenType)
                username = claims.flatMap(Self.username(in:))
            }
            return SignInIdentity(subject: claims.sub, username: username, idToken: idToken)
        }
        return try await identifyWithoutIDToken(tokens, provider: provider, metadata: metadata, dpop: signer, issued: &issued)
    }

    /// In the order that costs the provider least: userinfo with the sign-in's token;
    /// introspection; then, when userinfo refused an audience-restricted token, userinfo
    /// with a token asked without `resource` (a refresh, which rotating providers answer
    /// with a new refresh token).
    private func identifyWithoutIDToken(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata,
                                        dpop signer: DPoPSigner?, issued: inout IssuedTokens) async throws(BrokerError) -> SignInIdentity {
        let name = provider.name
        // With DPoP, the sign-in's tokens are bound to its new key: every request proves it.
        let client = provider.client(signer, metadata: metadata, clock: clock)
        var reasons: [String] = []
        var audienceRefused = false
        if metadata.userinfoEndpoint == nil {
            reasons.append("it has no userinfo endpoint")
        } else {
            do {
                let claims = try await client.userinfo(metadata, accessToken: tokens.accessToken, subject: nil, tokenType: tokens.tokenType)
                return SignInIdentity(subject: claims["sub"]?.stringValue ?? "", username: Self.username(in: claims))
            } catch {
                if case .provider("invalid_token", _, _) = error { audienceRefused = true }
                reasons.append("its userinfo endpoint failed (\(error.message))")
            }
        }
        if metadata.introspectionEndpoint != nil {
            do {
                if let subject = try await client.introspectSubject(metadata, accessToken: tokens.accessToken) {
                    return SignInIdentity(subject: subject)
                }
                reasons.append("its introspection endpoint did not name the token's subject")
            } catch {
                reasons.append("its introspection endpoint failed (\(error.message))")
            }
        }
        if audienceRefused, let current = issued.refreshToken {
            do {
                // A DPoP-bound refresh token needs its proof at the token endpoint.
                let unrestricted = try await client.refresh(metadata, refreshToken: current, resource: nil, scopes: nil)
                issued.accessTokens.append(unrestricted.accessToken)
                if let rotated = unrestricted.refreshToken { issued.refreshToken = rotated }
                let claims = try await client.userinfo(metadata, accessToken: unrestricted.accessToken, subject: nil,
                                                       tokenType: unrestricted.tokenType)
                return SignInIdentity(subject: claims["sub"]?.stringValue ?? "", username: Self.username(in: claims),
                                      refreshToken: issued.refreshToken)
            } catch {
                reasons.append("a token asked without a resource did not help (\(error.message))")
            }
        }
        throw BrokerError.loginFailed(provider: name, message: "\(name) returned no ID token and authbroker could not find out who signed in (\(reasons.joined(separator: "; "))): add \"openid\" to its scopes, or set userinfo_endpoint or introspection_endpoint under [providers.\(name)] in config.toml")
    }

    /// The name people know the account by: `preferred_username`, else `email`, else `name`.
    static func username(in claims: [String: JSONValue]) -> String? {
        for key in ["preferred_username", "email", "name"] {
            if let value = claims[key]?.stringValue, !value.isEmpty { return value }
        }
        return nil
    }

    /// Revokes what a refused sign-in received (RFC 7009), best effort, and returns the
    /// clause that tells the user what became of it.
    func revokeRefused(_ issued: IssuedTokens, provider: Provider, metadata: ProviderMetadata) async -> String {
        guard metadata.revocationEndpoint != nil else {
            return "the tokens it issued could not be revoked (it has no revocation endpoint: set revocation_endpoint under [providers.\(provider.name)]) and expire on their own"
        }
        var all: [(String, String)] = issued.refreshToken.map { [($0, "refresh_token")] } ?? []
        all += issued.accessTokens.map { ($0, "access_token") }
        var kept = 0
        for (token, hint) in all {
            let revoked = (try? await provider.client.revoke(metadata, token: token, tokenTypeHint: hint)) ?? false
            if !revoked { kept += 1 }
        }
        logger.info("revoked the tokens of a refused sign-in", metadata: ["provider": "\(provider.name)", "not_revoked": "\(kept)"])
        if kept == 0 { return "the tokens it issued were revoked" }
        return "\(kept) of the \(all.count) tokens it issued could not be revoked and expire on their own"
    }
}
