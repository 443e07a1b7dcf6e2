import SecretStore

extension Broker {
    /// The store's failure while its accounts are not loaded (the daemon started without
    /// it), else nil.
    public var storeFailure: StoreError? { availability.failure }

    /// The error for a request that needs an account of `provider` while the store's
    /// accounts are not loaded: not "not signed in", which would send the user to sign in
    /// again for nothing.
    func storeUnavailable(_ provider: String) -> BrokerError {
        let reason = availability.failure.map(\.message) ?? "it could not be read"
        return .storeUnavailable(message: "the sign-ins to \(provider) are in the secret store, which cannot be read yet (\(reason)); authbrokerd loads them as soon as it can", reason: availability.failure?.reason)
    }

    /// Reads the store and adds the accounts it holds for the configured providers (an
    /// account already in memory is newer and stays), then marks the store loaded.
    func loadStoredAccounts() async throws(StoreError) {
        try await store.check()
        let items = try await store.loadAll()
        let stored = StoredAccounts(items: items, config: config)
        for account in stored.accounts where accounts[account.key] == nil {
            accounts.put(account)
        }
        if !stored.clientSecrets.isEmpty {
            useStoredSecrets(table.withLock { $0.storedSecrets }.merging(stored.clientSecrets) { $1 })
        }
        availability.set(.loaded)
        logger.info("loaded accounts from the store", metadata: ["count": "\(accounts.list().count)", "store": "\(store.kind)"])
    }

    /// The machine account of every client-credentials provider of `config` (nothing stored).
    func addMachineAccounts(for config: BrokerConfig) {
        for p in config.providers where p.grant == .clientCredentials && accounts[Account.machine(for: p).key] == nil {
            accounts.put(Account.machine(for: p))
        }
    }

    /// Tries the store again, from a short wait up to `storeRetryInterval` between tries,
    /// until its accounts are loaded. A poll rather than a watch of the bus name: an
    /// unlock changes no bus name, and the cost is one small D-Bus round trip per try.
    /// At most one runs.
    func watchStore() {
        guard availability.startWatching() else { return }
        let longest = storeRetryInterval
        Task { [weak self] in
            var wait = min(Duration.milliseconds(500), longest)
            while true {
                try? await Task.sleep(for: wait)
                guard let self else { return }
                do throws(StoreError) {
                    try await self.loadStoredAccounts()
                    self.availability.stopWatching()
                    self.logger.notice("the secret store is available: its accounts are loaded", metadata: ["store": "\(self.store.kind)"])
                    return
                } catch {
                    self.availability.set(.unavailable(error))
                }
                wait = min(wait * 2, longest)
            }
        }
    }
}
