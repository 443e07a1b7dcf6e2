import BrokerProtocol
import Logging
import OAuth
import SecretStore

/// The sign-out service: `logout`. Revokes the account's refresh tokens at the provider
/// (RFC 7009) where it can, removes the item from the store, forgets the account and its
/// cached tokens, and gives the URL that ends the provider's browser session.
///
/// Owns no state. Depends on the accounts and `TokenForgetting`.
public final class SignOutService: RegistersMethods, Sendable {
    private let accounts: AccountsService
    private let tokens: TokenForgetting
    private let events: EventHub
    private let logger: Logger
    /// Where the end-session request with `id_token_hint` is served; nil: the URL without it.
    private let pages: EndSessionPages?

    init(accounts: AccountsService, tokens: TokenForgetting, events: EventHub, logger: Logger,
         redirects: (any RedirectListening)?) {
        self.accounts = accounts
        self.tokens = tokens
        self.events = events
        self.logger = logger
        self.pages = redirects.map { EndSessionPages(listening: $0, logger: logger) }
    }

    /// Revokes the refresh token at the provider (RFC 7009) where it can, removes the item
    /// from the store, and forgets the account's cached tokens. Runs in turn with the
    /// account's refreshes: one in flight ends first (its rotated refresh token is the one
    /// revoked), and none starts until the account is gone. One still reading a provider's
    /// late answer gets `Refresher.lateAnswerAtStop`, then is cut off: the account goes.
    public func logout(_ params: LogoutParams) async throws(BrokerError) -> LogoutResult {
        let (provider, resolved) = try accounts.resolved(provider: params.provider, account: params.account)
        if resolved.machine {
            tokens.dropCached(resolved.key)
            return LogoutResult(provider: provider.name, account: resolved.key.subject, revoked: false,
                                revocationNote: "\(provider.name) is a machine account: its cached tokens were dropped")
        }
        await tokens.cutOffLateAnswers(of: resolved.key)
        let outcome = await tokens.inTurnWithRefreshes(of: resolved.key) { () async -> Result<LogoutResult, BrokerError> in
            // As the last refresh left it; gone when another sign-out came first.
            guard let account = self.accounts[resolved.key] else { return .failure(.notSignedIn(provider.name)) }
            do throws(BrokerError) {
                return .success(try await self.signOut(account, at: provider, params))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// The sign-out itself, in turn with the account's refreshes. The item goes first: a
    /// store that refuses (a locked keyring) leaves the sign-in as it was, its refresh token
    /// not revoked, rather than listed ready with a dead one.
    private func signOut(_ account: Account, at provider: Provider, _ params: LogoutParams) async throws(BrokerError) -> LogoutResult {
        do {
            try await accounts.writes.delete(account)
        } catch {
            throw BrokerError.storeUnavailable(message: "\(account.displayName) is still signed in to \(provider.name), and nothing was revoked: its sign-in could not be removed from the store (\(error.message))", reason: error.reason)
        }
        accounts.remove(account.key)
        tokens.forget(account.key)
        var revoked = false
        var note: String?
        var endSession: (page: String?, direct: String)?
        if params.local == true {
            note = "signed out locally only, as asked"
        } else {
            (revoked, note) = await revoke(account, at: provider)
            // The browser session is ended whatever the revocation did: a public client that
            // may not revoke (the common case) still leaves a signed-in browser behind.
            endSession = await endSessionURLs(provider, account: account)
        }
        logger.info("signed out", metadata: ["account": "\(account.key)", "revoked": "\(revoked)"])
        events.emit(BrokerEvent(kind: .signedOut, provider: provider.name, account: account.displayName,
                                subject: account.key.subject))
        return LogoutResult(provider: provider.name, account: account.displayName, revoked: revoked,
                            revocationNote: note, endSessionURL: endSession.map { $0.page ?? $0.direct },
                            endSessionDirectURL: endSession?.page == nil ? nil : endSession?.direct)
    }

    /// Revokes the account's refresh tokens (RFC 7009), each resource's own ones too
    /// (`refresh_tokens = "one-per-resource"`): whether the provider confirmed them all, and
    /// why not when it did not. One refused is no reason to leave the others valid.
    private func revoke(_ account: Account, at provider: Provider) async -> (Bool, String?) {
        let metadata: ProviderMetadata
        do {
            metadata = try await provider.discovered()
        } catch {
            // Not "try again": the account is removed here whatever the revocation did.
            if case .providerUnreachable = error { return (false, Self.unreachable(provider.name, nil)) }
            return (false, error.message)
        }
        guard metadata.revocationEndpoint != nil else { return (false, "\(provider.name) has no revocation endpoint") }
        let tokens = [account.refreshToken] + account.resourceRefreshTokens.keys.sorted().compactMap { account.resourceRefreshTokens[$0] }
        var confirmed = 0
        var refusals: [String] = []
        for token in tokens {
            do {
                if try await provider.client.revoke(metadata, token: token, tokenTypeHint: "refresh_token") { confirmed += 1 }
            } catch {
                // No answer is no refusal: the provider never saw the request (nor would it the next).
                if error.isNoAnswer { return (false, Self.unreachable(provider.name, error.message)) }
                refusals.append(error.message)
            }
        }
        if let first = refusals.first {
            let which = tokens.count == 1 ? "" : " of \(refusals.count) of the account's \(tokens.count) refresh tokens (the others were sent too)"
            return (false, "\(provider.name) refused the revocation\(which): \(first)")
        }
        return confirmed == tokens.count ? (true, nil) : (false, "\(provider.name) did not confirm the revocation")
    }

    /// The note for a revocation that never reached the provider: what it leaves alive.
    private static func unreachable(_ name: String, _ detail: String?) -> String {
        "\(name) could not be reached\(detail.map { " (\($0))" } ?? ""), so the refresh token, removed here, stays valid at \(name) until it expires or is revoked there"
    }

    /// What ends the provider's browser session too, when it has an end-session endpoint:
    /// the sign-out page that posts the account's last ID token as `id_token_hint`
    /// (`EndSessionPages`) when there is one, and the URL without the hint (for a browser
    /// on another computer, where the page's loopback address does not lead here).
    private func endSessionURLs(_ provider: Provider, account: Account) async -> (page: String?, direct: String)? {
        guard let metadata = try? await provider.discovered() else { return nil }
        let hint = account.username, back = provider.config.postLogoutRedirectURI
        guard let direct = provider.client.endSessionURL(metadata, logoutHint: hint, postLogoutRedirectURI: back) else { return nil }
        guard let pages, let idToken = account.idToken,
              let form = provider.client.endSessionForm(metadata, idTokenHint: idToken, logoutHint: hint, postLogoutRedirectURI: back)
        else { return (nil, direct) }
        return (await pages.open(provider: provider.name, account: account.displayName, form: form), direct)
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .logout, empty: LogoutParams(),
            access: .open("the user's own management (`authctl logout`): it ends a sign-in and answers no token, claim or secret; the [[allow]] rules restrict what programs may get, not the user's account management (docs/security.md)"),
            answer: .later { p throws(BrokerError) in try await self.logout(p) }))
    }
}
