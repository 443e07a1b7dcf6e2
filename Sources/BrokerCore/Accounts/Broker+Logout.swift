import BrokerProtocol
import OAuth
import SecretStore

extension Broker {
    /// Revokes the refresh token at the provider (RFC 7009) where it can, removes the item
    /// from the store, and forgets the account's cached tokens.
    public func logout(_ params: LogoutParams) async throws(BrokerError) -> LogoutResult {
        let provider = try provider(params.provider)
        let account = try account(of: provider.name, named: params.account)
        var revoked = false
        var note: String?
        do {
            let metadata = try await provider.discovered()
            if metadata.revocationEndpoint == nil {
                note = "\(provider.name) has no revocation endpoint"
            } else {
                revoked = try await provider.client.revoke(metadata, token: account.refreshToken, tokenTypeHint: "refresh_token")
                if !revoked { note = "\(provider.name) did not confirm the revocation" }
            }
        } catch let error as BrokerError {
            note = error.message
        } catch let error as OAuthError {
            note = "\(provider.name) refused the revocation: \(error.message)"
        } catch {
            note = "the revocation failed"
        }
        do {
            try await store.delete(CredentialKey(provider: account.key.provider, issuer: account.issuer, clientID: account.clientID, subject: account.key.subject))
        } catch {
            throw BrokerError.storeUnavailable(message: "could not remove the sign-in from the store: \(error.message)")
        }
        forget(account.key)
        logger.info("signed out", metadata: ["account": "\(account.key)", "revoked": "\(revoked)"])
        return LogoutResult(provider: provider.name, account: account.username ?? account.key.subject, revoked: revoked, revocationNote: note)
    }
}
