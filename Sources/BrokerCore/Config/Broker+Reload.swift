import BrokerProtocol
import OAuth
import SecretStore

/// The configuration and the run-time providers built from it.
struct ProviderTable: Sendable {
    var config: BrokerConfig
    var providers: [String: Provider]
    /// Client secrets kept in the Secret Service (`authctl set-secret`), by provider name;
    /// used where the configuration has none.
    var storedSecrets: [String: String]

    /// Builds the providers of `config`, keeping those whose configuration did not change
    /// (with their discovery document and back-off).
    init(config: BrokerConfig, storedSecrets: [String: String] = [:], keeping old: [String: Provider],
         transport: any HTTPTransport, clock: WallClock, events: EventHub) {
        self.config = config
        self.storedSecrets = storedSecrets
        var providers: [String: Provider] = [:]
        for var p in config.providers {
            if p.clientSecret == nil { p.clientSecret = storedSecrets[p.name] }
            if let kept = old[p.name], kept.config == p {
                providers[p.name] = kept
            } else {
                providers[p.name] = Provider(config: p, transport: transport, clock: clock, events: events)
            }
        }
        self.providers = providers
    }
}

/// What a reload changed, for the log.
public struct ReloadSummary: Sendable, Equatable {
    public var added: [String] = []
    public var changed: [String] = []
    public var removed: [String] = []
}

extension Broker {
    /// Puts a new configuration in force (SIGHUP), as one transaction: the new providers
    /// and their accounts are made ready first, then swapped in; when that fails (the store
    /// does not answer), nothing has changed and the old configuration keeps serving.
    ///
    /// Unchanged providers keep their state, accounts and cached tokens. A changed provider
    /// keeps the accounts in memory that still belong to it (same issuer and client: they
    /// hold the newest refresh tokens, some perhaps not written yet), and its cached tokens
    /// are dropped. The store is read only for what memory cannot hold: an added provider,
    /// or one whose issuer or client changed. Until the swap, callers are served from the
    /// old accounts: a reload never answers "not signed in". Accounts of removed providers
    /// are forgotten (their Secret Service items stay). The store kind cannot change
    /// without a restart.
    public func reload(_ new: BrokerConfig) async throws(BrokerError) -> ReloadSummary {
        let old = config
        guard new.daemon.store == old.daemon.store else {
            throw BrokerError.invalidRequest(message: "daemon.store cannot change while the daemon runs: restart it (`systemctl --user restart authbroker.service`)")
        }
        let summary = ReloadSummary(from: old, to: new)
        // Providers whose accounts live in the store but not (or not all) in memory.
        let unread = Set(summary.added + summary.changed.filter { name in
            guard let before = old.provider(named: name), let after = new.provider(named: name) else { return true }
            return before.issuer != after.issuer || before.clientID != after.clientID
        })
        var stored = StoredAccounts(items: [], config: new)
        if !unread.isEmpty && availability.failure == nil {
            do {
                stored = StoredAccounts(items: try await store.loadAll(), config: new, only: unread)
            } catch {
                throw BrokerError.storeUnavailable(
                    message: "the accounts of \(unread.sorted().joined(separator: ", ")) could not be read from the secret store (\(error.message))",
                    reason: error.reason)
            }
        }

        // The swap. Between the table and the accounts a caller may meet the new provider
        // with its old accounts, never with none.
        table.withLock { t in
            t = ProviderTable(config: new, storedSecrets: t.storedSecrets.merging(stored.clientSecrets) { $1 },
                              keeping: t.providers, transport: transport, clock: clock, events: events)
        }
        let touched = Set(summary.changed + summary.removed + summary.added)
        let dropped = accounts.replace(providers: touched) { current in
            var next: [AccountKey: Account] = [:]
            for account in current {
                guard let p = new.provider(named: account.key.provider), p.issuer == account.issuer, p.clientID == account.clientID,
                      account.machine == (p.grant == .clientCredentials)
                else { continue }
                next[account.key] = account
            }
            for account in stored.accounts where next[account.key] == nil {
                next[account.key] = account
            }
            return Array(next.values)
        }
        addMachineAccounts(for: new)
        // Restarted by the next requests, under the new configuration.
        stopRefreshingAhead()
        for name in summary.changed + summary.removed {
            for key in accounts.list(provider: name).map(\.key) + dropped.map(\.key) where key.provider == name {
                cache.removeAll(for: key)
            }
        }
        logger.notice("configuration reloaded", metadata: [
            "added": "\(summary.added.joined(separator: ","))",
            "changed": "\(summary.changed.joined(separator: ","))",
            "removed": "\(summary.removed.joined(separator: ","))",
        ])
        return summary
    }
}

extension Broker {
    /// The last reload, when it was refused; nil when it took effect or none was asked for.
    public var reloadRefusal: ReloadRefusedStatus? { refusedReload.withLock { $0 } }

    /// Records how the last reload ended, for `daemon.status`: nil when it took effect,
    /// else the sentence that says why it was refused.
    public func noteReload(refused message: String?) {
        let refusal = message.map { ReloadRefusedStatus(at: Int64(clock.now()), message: $0) }
        refusedReload.withLock { $0 = refusal }
    }
}

extension ReloadSummary {
    /// The providers `new` adds, changes and removes compared with `old`.
    init(from old: BrokerConfig, to new: BrokerConfig) {
        let oldConfigs = Dictionary(old.providers.map { ($0.name, $0) }) { first, _ in first }
        for p in new.providers {
            if let before = oldConfigs[p.name] {
                if before != p { changed.append(p.name) }
            } else {
                added.append(p.name)
            }
        }
        removed = old.providers.map(\.name).filter { new.provider(named: $0) == nil }
    }
}
