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
                  issued: inout IssuedTokens) async throws(BrokerError) -> SignInIdentity {
        if let idToken = tokens.idToken {
            let claims = try await verifyIDToken(idToken, provider: provider, metadata: metadata, nonce: nonce)
            var username = claims.preferredUsername ?? claims.email ?? claims.name
            if username == nil, metadata.userinfoEndpoint != nil {
                // Best effort: the ID token names nobody a person would recognise.
                let claims = try? await provider.client.userinfo(metadata, accessToken: tokens.accessToken, subject: claims.sub)
                username = claims.flatMap(Self.username(in:))
            }
            return SignInIdentity(subject: claims.sub, username: username, idToken: idToken)
        }
        let name = provider.name
        var subject: String?
        var reasons: [String] = []
        if metadata.introspectionEndpoint != nil {
            do {
                subject = try await provider.client.introspectSubject(metadata, accessToken: tokens.accessToken)
                if subject == nil { reasons.append("its introspection endpoint did not name the token's subject") }
            } catch {
                reasons.append("its introspection endpoint failed (\(error.message))")
            }
        }
        if metadata.userinfoEndpoint != nil {
            switch await userinfoForSignIn(tokens, provider: provider, metadata: metadata, subject: subject, issued: &issued) {
            case .success(let found):
                return SignInIdentity(subject: found.subject, username: Self.username(in: found.claims),
                                      refreshToken: found.refreshToken)
            case .failure(let reason):
                reasons.append(reason.message)
            }
        }
        if let subject { return SignInIdentity(subject: subject) }
        if metadata.userinfoEndpoint == nil { reasons.append("it has no userinfo endpoint") }
        throw BrokerError.loginFailed(provider: name, message: "\(name) returned no ID token and authbroker could not find out who signed in (\(reasons.joined(separator: "; "))): add \"openid\" to its scopes, or set userinfo_endpoint or introspection_endpoint under [providers.\(name)] in config.toml")
    }

    private struct UserinfoAnswer: Sendable {
        var subject: String
        var claims: [String: JSONValue]
        var refreshToken: String?
    }

    private struct Reason: Error {
        var message: String
    }

    /// The userinfo answer for the sign-in's access token. An audience-checking provider
    /// refuses a token restricted to the configured resources; then a token asked without
    /// `resource` (a refresh) is tried once, where the grant gives one.
    private func userinfoForSignIn(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata,
                                   subject: String?, issued: inout IssuedTokens) async -> Result<UserinfoAnswer, Reason> {
        let client = provider.client
        let refused: OAuthError
        do {
            let claims = try await client.userinfo(metadata, accessToken: tokens.accessToken, subject: subject)
            return .success(UserinfoAnswer(subject: claims["sub"]?.stringValue ?? "", claims: claims))
        } catch {
            refused = error
        }
        guard case .provider("invalid_token", _, _) = refused, let current = issued.refreshToken else {
            return .failure(Reason(message: "its userinfo endpoint failed (\(refused.message))"))
        }
        let unrestricted: TokenResponse
        do {
            unrestricted = try await client.refresh(metadata, refreshToken: current, resource: nil, scopes: nil)
        } catch {
            return .failure(Reason(message: "its userinfo endpoint refused the sign-in's token, and a token without a resource could not be had (\(error.message))"))
        }
        issued.accessTokens.append(unrestricted.accessToken)
        if let rotated = unrestricted.refreshToken { issued.refreshToken = rotated }
        do {
            let claims = try await client.userinfo(metadata, accessToken: unrestricted.accessToken, subject: subject)
            return .success(UserinfoAnswer(subject: claims["sub"]?.stringValue ?? "", claims: claims,
                                           refreshToken: unrestricted.refreshToken))
        } catch {
            return .failure(Reason(message: "its userinfo endpoint refused even a token asked without a resource (\(error.message))"))
        }
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
