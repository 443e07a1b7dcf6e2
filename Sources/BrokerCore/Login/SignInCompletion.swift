import BrokerProtocol
import Logging
import OAuth
import SecretStore

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

/// Why a sign-in's account was not kept.
private enum NotStored: Error {
    /// A reload while the sign-in ran removed its provider, or gave it another issuer or client.
    case providerChanged(removed: Bool)
}

/// The tokens a sign-in has received so far, to revoke if it is refused.
struct IssuedTokens: Sendable {
    var accessTokens: [String]
    var refreshToken: String?
}

/// The end every sign-in flow shares: who signed in (`identify`), the account stored before
/// it is served, its stale cached tokens dropped, `signed_in` told; and, when the sign-in is
/// refused, what it issued revoked.
///
/// Owns no state. Depends on the providers (ID-token keys), the accounts and the store,
/// and `TokenForgetting`.
final class SignInCompletion: Sendable {
    private let providers: ProvidersService
    private let accounts: AccountsService
    private let cachedTokens: TokenForgetting
    private let events: EventHub
    private let logger: Logger
    private let clock: WallClock

    init(providers: ProvidersService, accounts: AccountsService, tokens: TokenForgetting, events: EventHub,
         logger: Logger, clock: WallClock) {
        self.providers = providers
        self.accounts = accounts
        self.cachedTokens = tokens
        self.events = events
        self.logger = logger
        self.clock = clock
    }

    /// Turns a token response from a sign-in into a stored, ready account. A sign-in for
    /// one `resource` of a `refresh_tokens = "one-per-resource"` provider adds that
    /// resource's refresh token to the account instead (docs/providers.md).
    func completeLogin(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata, nonce: String?,
                       dpop signer: DPoPSigner?, resource: String? = nil,
                       demand: AuthenticationDemand? = nil) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        var issued = IssuedTokens(accessTokens: [tokens.accessToken], refreshToken: tokens.refreshToken)
        let identity: SignInIdentity
        do {
            identity = try await identify(tokens, provider: provider, metadata: metadata, nonce: nonce, dpop: signer, issued: &issued,
                                          demand: demand)
        } catch {
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            throw error.appending(revocation)
        }
        guard let refreshToken = identity.refreshToken ?? tokens.refreshToken else {
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            let consent = provider.config.consentForOfflineAccess
                ? "the browser sign-in (`authctl login --provider \(name)`, not --device), which asks for it with prompt=consent"
                : "prompt=consent, which the browser sign-in sends once consent_for_offline_access = false is removed from [providers.\(name)]"
            throw BrokerError.loginFailed(provider: name, message: "\(name) issued no refresh token: add \"offline_access\" to its scopes in config.toml, or allow refresh tokens for client \(provider.config.clientID); a provider that grants offline access only after consent (OpenID Connect Core §11) needs \(consent) (docs/providers.md); \(revocation)")
        }
        var signedIn = Account(
            key: AccountKey(provider: name, subject: identity.subject),
            issuer: provider.config.issuer, clientID: provider.config.clientID,
            username: identity.username, refreshToken: refreshToken, idToken: identity.idToken, state: .ready)
        signedIn.dpop = signer
        let new = signedIn
        // In turn with the account's refreshes: one in flight ends first, so its rotated
        // refresh token (of the old sign-in) cannot land after this one and replace it.
        let stored = await cachedTokens.inTurnWithRefreshes(of: new.key) { () async -> Result<(Account, replaced: String?), NotStored> in
            await self.keep(new, provider: provider, resource: resource)
        }
        let account: Account
        let replaced: String?
        switch stored {
        case .success(let saved):
            (account, replaced) = saved
        case .failure(.providerChanged(let removed)):
            let revocation = await revokeRefused(issued, provider: provider, metadata: metadata)
            let change = removed ? "was removed from config.toml" : "now has another issuer or client_id in config.toml"
            logger.notice("a sign-in finished for a provider the configuration changed meanwhile; not kept", metadata: ["provider": "\(name)"])
            throw BrokerError.loginFailed(provider: name, message: "the configuration was reloaded while signing in: [providers.\(name)] \(change), so this sign-in was not kept (\(revocation))\(removed ? "" : ": run `authctl login --provider \(name)` to sign in under the new one")")
        }
        if account.unsaved {
            logger.error("signed in, but the secret store refused the refresh token: held in memory and written when the store takes it", metadata: ["account": "\(account.key)", "error": "\(account.unsavedBecause?.message ?? "-")"])
            accounts.writes.retrySave(account.key)
        } else {
            logger.info("signed in", metadata: ["account": "\(account.key)"])
        }
        events.emit(BrokerEvent(kind: .signedIn, provider: name, account: account.displayName, subject: account.key.subject))
        var info = account.info
        if let replaced, account.unsaved {
            // The store still holds the replaced sign-in: revoked, a restart before the new
            // one is written would find neither.
            info.replacedSignIn = "the refresh token of the sign-in it replaced was not revoked, because the store still holds it until this one is written"
        } else if let replaced {
            info.replacedSignIn = await revokeReplaced(replaced, of: account, provider: provider, metadata: metadata)
        }
        return info
    }

    /// Stores the account a sign-in made and puts it in memory (in turn with its
    /// refreshes), unless a reload meanwhile removed its provider or moved it to another
    /// issuer or client. A store that refuses leaves it in memory, listed as not saved.
    private func keep(_ new: Account, provider: Provider, resource: String?) async -> Result<(Account, replaced: String?), NotStored> {
        // Then the sign-in belongs to no provider that is configured now.
        guard let now = providers.config.provider(named: provider.name), new.belongs(to: now) else {
            return .failure(.providerChanged(removed: providers.config.provider(named: provider.name) == nil))
        }
        var account = new
        let before = accounts[account.key]
        if provider.config.refreshTokens == .onePerResource, let known = before, known.state == .ready {
            // The other resources' sign-ins stay valid; one for `resource` adds to them.
            account.resourceRefreshTokens = known.resourceRefreshTokens
            if let resource {
                account.resourceRefreshTokens[resource] = new.refreshToken
                account.refreshToken = known.refreshToken
                account.rotatedFor = known.rotatedFor
            }
        }
        do throws(StoreError) {
            try await accounts.writes.store(account)
        } catch {
            // The store went away (bus restarted, keyring locked, disk full) after
            // `login.start` found it usable: the sign-in the user just approved is held
            // in memory, listed as not saved, and written when the store takes it, as
            // a rotation the store refused is; not revoked.
            account.unsaved = true
            account.unsavedBecause = error
        }
        cachedTokens.dropCached(account.key)
        accounts.put(account)
        return .success((account, Self.replaced(before, by: account, resource: resource)))
    }

    /// The refresh token the sign-in `after` took the place of in `before` (the account as
    /// memory held it: its newest refresh token), if any: the resource's own for a sign-in
    /// for one resource of a `refresh_tokens = "one-per-resource"` provider, else the
    /// account's. None when the provider handed the same one out again.
    private static func replaced(_ before: Account?, by after: Account, resource: String?) -> String? {
        guard let before, !before.machine else { return nil }
        let old: String?, new: String?
        if let resource, after.resourceRefreshTokens[resource] != nil, after.refreshToken == before.refreshToken {
            (old, new) = (before.resourceRefreshTokens[resource], after.resourceRefreshTokens[resource])
        } else {
            (old, new) = (before.refreshToken, after.refreshToken)
        }
        guard let old, !old.isEmpty, old != new else { return nil }
        return old
    }

    /// Revokes the refresh token a new sign-in replaced (RFC 7009): nobody needs it any
    /// more, and whoever copied it could go on using it. Best effort, after the new sign-in
    /// is stored, not cancelled with the sign-in; returns the sentence the answer carries.
    private func revokeReplaced(_ token: String, of account: Account, provider: Provider, metadata: ProviderMetadata) async -> String {
        let name = provider.name
        guard provider.config.revokeReplacedSignIn else {
            logger.info("a new sign-in replaced a refresh token, not revoked (revoke_replaced_sign_in = false)", metadata: ["account": "\(account.key)"])
            return "the refresh token of the sign-in it replaced was not revoked (revoke_replaced_sign_in = false for \(name)) and stays valid at \(name) until it expires"
        }
        guard metadata.revocationEndpoint != nil else {
            logger.notice("a new sign-in replaced a refresh token that cannot be revoked: no revocation endpoint", metadata: ["account": "\(account.key)"])
            return "the refresh token of the sign-in it replaced could not be revoked (\(name) has no revocation endpoint: set revocation_endpoint under [providers.\(name)]) and stays valid at \(name) until it expires"
        }
        let outcome = await Task { () async -> Result<Bool, OAuthError> in
            do throws(OAuthError) {
                return .success(try await provider.client.revoke(metadata, token: token, tokenTypeHint: "refresh_token"))
            } catch {
                return .failure(error)
            }
        }.value
        switch outcome {
        case .success(true):
            logger.info("revoked the refresh token of the sign-in this one replaced", metadata: ["account": "\(account.key)"])
            return "the refresh token of the sign-in it replaced was revoked at \(name)"
        case .success(false):
            logger.notice("the provider did not confirm the revocation of the refresh token a new sign-in replaced", metadata: ["account": "\(account.key)"])
            return "\(name) did not confirm the revocation of the refresh token of the sign-in it replaced"
        case .failure(let error):
            logger.notice("the refresh token a new sign-in replaced could not be revoked", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            return "the refresh token of the sign-in it replaced could not be revoked (\(error.message)) and stays valid at \(name) until it expires"
        }
    }


    /// The account behind `tokens`. Throws `.loginFailed` when it cannot be named; the
    /// caller then revokes `issued`.
    func identify(_ tokens: TokenResponse, provider: Provider, metadata: ProviderMetadata, nonce: String?,
                  dpop signer: DPoPSigner?, issued: inout IssuedTokens,
                  demand: AuthenticationDemand? = nil) async throws(BrokerError) -> SignInIdentity {
        // With DPoP, the sign-in's tokens are bound to its new key: every request proves it.
        let client = provider.client(signer, metadata: metadata, clock: clock)
        if demand != nil, tokens.idToken == nil {
            throw BrokerError.loginFailed(provider: provider.name, message: "\(provider.name) returned no ID token, so the acr_values or max_age this sign-in asked for (RFC 9470) cannot be checked: add \"openid\" to its scopes")
        }
        if let idToken = tokens.idToken {
            let claims = try await providers.verifyIDToken(idToken, provider: provider, metadata: metadata, nonce: nonce)
            try demand?.check(claims, provider: provider.name, now: clock.now(), skew: providers.config.daemon.clockSkew)
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
    /// clause that tells the user what became of it. A cancelled sign-in's tokens are
    /// revoked too: the revocation does not inherit the cancellation.
    func revokeRefused(_ issued: IssuedTokens, provider: Provider, metadata: ProviderMetadata) async -> String {
        await Task { await self.revoke(issued, provider: provider, metadata: metadata) }.value
    }

    private func revoke(_ issued: IssuedTokens, provider: Provider, metadata: ProviderMetadata) async -> String {
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
