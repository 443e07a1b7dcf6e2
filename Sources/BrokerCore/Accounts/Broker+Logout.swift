import BrokerProtocol
import OAuth
import SecretStore

extension Broker {
    /// Revokes the refresh token at the provider (RFC 7009) where it can, removes the item
    /// from the store, and forgets the account's cached tokens.
    public func logout(_ params: LogoutParams) async throws(BrokerError) -> LogoutResult {
        let (provider, account) = try resolved(provider: params.provider, account: params.account)
        if account.machine {
            cache.removeAll(for: account.key)
            return LogoutResult(provider: provider.name, account: account.key.subject, revoked: false,
                                revocationNote: "\(provider.name) is a machine account: its cached tokens were dropped")
        }
        var revoked = false
        var note: String?
        var endSession: String?
        if params.local == true {
            note = "signed out locally only, as asked"
        } else { do {
            let metadata = try await provider.discovered()
            if metadata.revocationEndpoint == nil {
                note = "\(provider.name) has no revocation endpoint"
            } else {
                revoked = try await provider.client.revoke(metadata, token: account.refreshToken, tokenTypeHint: "refresh_token")
                if !revoked { note = "\(provider.name) did not confirm the revocation" }
            }
            endSession = try await endSessionURL(provider, account: account)
        } catch let error as BrokerError {
            note = error.message
        } catch let error as OAuthError {
            note = "\(provider.name) refused the revocation: \(error.message)"
        } catch {
            note = "the revocation failed"
        } }
        do {
            try await store.delete(CredentialKey(provider: account.key.provider, issuer: account.issuer, clientID: account.clientID, subject: account.key.subject))
        } catch {
            throw BrokerError.storeUnavailable(message: "could not remove the sign-in from the store: \(error.message)")
        }
        forget(account.key)
        logger.info("signed out", metadata: ["account": "\(account.key)", "revoked": "\(revoked)"])
        return LogoutResult(provider: provider.name, account: account.displayName, revoked: revoked,
                            revocationNote: note, endSessionURL: endSession)
    }

    /// The URL that ends the provider's browser session too, when it has one.
    private func endSessionURL(_ provider: Provider, account: Account) async throws(BrokerError) -> String? {
        provider.client.endSessionURL(try await provider.discovered(), logoutHint: account.username,
                                      postLogoutRedirectURI: provider.config.postLogoutRedirectURI)
    }
}
