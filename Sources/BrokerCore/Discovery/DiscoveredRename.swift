import BrokerProtocol
import SecretStore

/// Renames a provider found by discovery (`provider.rename`): its generated name is the
/// issuer's host, which the user may want shorter or clearer. The provider, its client and
/// its accounts move to the new name in the store and in memory, each account in turn with
/// its refreshes; its cached tokens are dropped (the next request refreshes under the new
/// name). A store that does not take the new items leaves everything under the old name.
struct DiscoveredRename: Sendable {
    let providers: ProvidersService
    let accounts: AccountsService
    let store: any CredentialStore
    let tokens: TokenForgetting

    /// The characters a provider name may have here: what a user types after --provider.
    static func check(_ name: String) throws(BrokerError) {
        let allowed = name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || "._:-".unicodeScalars.contains($0)) }
        guard !name.isEmpty, name.count <= 64, allowed else {
            throw BrokerError.invalidRequest(message: "a provider name has 1 to 64 letters, digits, dots, colons, hyphens or underscores: choose another name")
        }
    }

    func rename(_ old: ProviderConfig, to name: String) async throws(BrokerError) -> ProviderRenameResult {
        guard providers.provider(orDefault: name) == nil else {
            throw BrokerError.invalidRequest(message: "a provider named \(name) exists already: choose another name")
        }
        var renamed = old
        renamed.name = name
        guard let item = DiscoveredProviderItem.credential(for: renamed) else {
            throw BrokerError.internalError("the renamed provider could not be encoded")
        }
        do {
            try await store.save(item)
        } catch {
            throw BrokerError.storeUnavailable(message: "\(old.name) could not be renamed, because the secret store did not take it (\(error.message)); nothing changed", reason: error.reason)
        }
        providers.discovered { d in
            d.providers[old.name] = nil
            d.providers[name] = renamed
        }
        var moved = 0
        var failure: StoreError?
        for account in accounts.list(provider: old.name) {
            let refusal = await tokens.inTurnWithRefreshes(of: account.key) { () async -> StoreError? in
                guard var current = self.accounts[account.key] else { return nil }
                current.key = AccountKey(provider: name, subject: current.key.subject)
                do throws(StoreError) {
                    try await self.store.save(AccountSecret.credential(for: current))
                } catch {
                    return error
                }
                self.accounts.remove(account.key)
                self.accounts.put(current)
                self.tokens.forget(account.key)
                _ = try? await self.store.delete(CredentialKey(provider: old.name, issuer: current.issuer, clientID: current.clientID,
                                                                subject: current.key.subject))
                return nil
            }
            if let refusal { failure = refusal } else { moved += 1 }
        }
        _ = try? await store.delete(CredentialKey(provider: old.name, issuer: old.issuer, clientID: old.clientID, subject: ""))
        if let failure {
            throw BrokerError.storeUnavailable(message: "\(old.name) is \(name) now, but \(accounts.list(provider: old.name).count) of its sign-ins could not be moved, because the secret store did not take them (\(failure.message)): sign in again with `authctl login --provider \(name)`", reason: failure.reason)
        }
        return ProviderRenameResult(provider: name, accounts: moved)
    }
}
