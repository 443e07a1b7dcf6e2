import Logging

/// Puts a new configuration in force (SIGHUP), as one transaction across the services it
/// touches: the providers' table, the accounts, the tokens of changed providers. The new
/// providers and their accounts are made ready first, then swapped in; when that fails
/// (the store does not answer), nothing has changed and the old configuration keeps
/// serving.
///
/// Unchanged providers keep their state, accounts and cached tokens. A changed provider
/// keeps the accounts in memory that still belong to it (same issuer and client: they
/// hold the newest refresh tokens, some perhaps not written yet), and its cached tokens
/// are dropped. The store is read only for what memory cannot hold: an added provider,
/// or one whose issuer or client changed. Until the swap, callers are served from the
/// old accounts: a reload never answers "not signed in". Accounts of removed providers
/// are forgotten (their Secret Service items stay). The store kind cannot change
/// without a restart.
///
/// Owns no state; a reload is not an RPC method.
struct ConfigurationReload: Sendable {
    let providers: ProvidersService
    let accounts: AccountsService
    let tokens: TokenForgetting
    let logger: Logger

    func reload(_ file: BrokerConfig) async throws(BrokerError) -> ReloadSummary {
        let old = providers.config
        // What discovery found stays: the summary compares the configurations in force.
        let new = providers.withDiscoveries(file)
        guard new.daemon.store == old.daemon.store else {
            throw BrokerError.invalidRequest(message: "daemon.store cannot change while the daemon runs: restart it (`systemctl --user restart authbroker.service`)")
        }
        let summary = ReloadSummary(from: old, to: new)
        // Providers whose accounts live in the store but not (or not all) in memory.
        let unread = Set(summary.added + summary.changed.filter { name in
            guard let before = old.provider(named: name), let after = new.provider(named: name) else { return true }
            return before.issuer != after.issuer || before.clientID != after.clientID
        })
        try await saveUnsaved(of: unread.union(summary.removed).subtracting(summary.added))
        let stored = try await accounts.stored(for: new, only: unread)

        // The swap. Between the table and the accounts a caller may meet the new provider
        // with its old accounts, never with none.
        // A stored client secret belongs to one issuer and client_id, as its item says: a
        // provider removed, or moved to another issuer or client, keeps none of the old one,
        // which would otherwise be sent to the new issuer (a restart would not load it).
        providers.replace(config: file, adding: stored.clientSecrets, forgetting: unread.union(summary.removed))
        let touched = Set(summary.changed + summary.removed + summary.added)
        let dropped = accounts.reconcile(touched, with: new, stored: stored)
        // Restarted by the next requests, under the new configuration.
        tokens.stopRefreshingAhead()
        // A change that does not touch how tokens are got (a post-logout page, a redirect
        // port, refresh-ahead) keeps them: busy callers would otherwise all miss at once.
        let tokensChanged = summary.changed.filter { name in
            guard let before = old.provider(named: name), let after = new.provider(named: name) else { return true }
            return !before.mintsAlike(after)
        }
        for name in tokensChanged + summary.removed {
            for key in accounts.list(provider: name).map(\.key) + dropped.map(\.key) where key.provider == name {
                tokens.dropCached(key)
            }
        }
        logger.notice("configuration reloaded", metadata: [
            "added": "\(summary.added.joined(separator: ","))",
            "changed": "\(summary.changed.joined(separator: ","))",
            "removed": "\(summary.removed.joined(separator: ","))",
        ])
        return summary
    }

    /// Writes the newest refresh token of each account of `forgotten` providers (removed,
    /// or moved to another issuer or client) that only memory holds (the store refused it
    /// at rotation), in turn with the account's refreshes: the reload forgets the account,
    /// and the provider put back would read the older, rotated-away refresh token. Throws
    /// when the store does not take one: the reload is refused, the account kept.
    private func saveUnsaved(of forgotten: Set<String>) async throws(BrokerError) {
        for key in accounts.list().filter({ forgotten.contains($0.key.provider) && $0.unsaved }).map(\.key) {
            if let failure = await accounts.writes.storeUnsavedInTurn(key) {
                throw BrokerError.storeUnavailable(
                    message: "the newest refresh token of \(self.accounts[key]?.displayName ?? key.subject) at \(key.provider) is only in memory and the secret store did not take it (\(failure.message)); the new configuration would forget it and leave \(key.provider) with an older one that no longer works: once the store takes it (unlock the keyring), reload again",
                    reason: failure.reason)
            }
        }
    }
}
