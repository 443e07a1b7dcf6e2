import BrokerProtocol
import Logging
import SecretStore
import Synchronization

/// The accounts' persistence rules, in one place: a change goes into memory first (so it
/// is never lost), then to the store; a newest refresh token the store refused is marked
/// unsaved (listed so, with the reason) and written again in the background, in turn with
/// the account's refreshes, until the store takes it; before the daemon stops it is
/// written once more. A refresh answered after a reload forgot its account only writes the
/// item (`replace(ifStill:)` fails). The refresher, the sign-in and the reload call these.
///
/// Part of the accounts service (`AccountsService.writes`), over its registry and store;
/// owns each account's turn (`AccountTurns`) and the set of accounts being written again.
final class AccountWrites: Sendable {
    private let registry: AccountRegistry
    private let store: any CredentialStore
    private let logger: Logger
    private let turns: AccountTurns
    /// Accounts whose newest refresh token is being written again (see `retrySave`).
    private let resaving = Mutex<Set<AccountKey>>([])

    init(registry: AccountRegistry, store: any CredentialStore, logger: Logger) {
        self.registry = registry
        self.store = store
        self.logger = logger
        self.turns = AccountTurns(logger: logger)
    }

    /// The account's queue (`AccountTurns`): every refresh of it, and every write of its
    /// newest refresh token, runs in it.
    func turn(of key: AccountKey) -> RefreshQueue { turns.queue(for: key) }

    /// Gives the account's refresh in flight `Refresher.lateAnswerAtStop` to end, then
    /// cancels it (a sign-out needs no late answer).
    func cutOffLateAnswers(of key: AccountKey) async {
        await turns.settle(turns.queue(for: key), of: key, stopping: false)
    }

    /// Whether the store takes writes now (before a sign-in is started).
    func checkStore() async throws(StoreError) { try await store.check() }

    /// Writes a new sign-in's account; the caller keeps it in memory either way.
    func store(_ account: Account) async throws(StoreError) {
        try await store.save(AccountSecret.credential(for: account))
    }

    /// Deletes the account's item (sign-out).
    func delete(_ account: Account) async throws(StoreError) {
        try await store.delete(CredentialKey(provider: account.key.provider, issuer: account.issuer, clientID: account.clientID,
                                             subject: account.key.subject))
    }

    /// Writes what memory holds of the account, best effort: a refusal leaves the item
    /// written before (a refused refresh token, remembered so `account.list` says so after
    /// a restart too; a resource's sign-in dropped).
    func storeAsItIs(_ key: AccountKey) async {
        if let current = registry[key] { try? await store.save(AccountSecret.credential(for: current)) }
    }

    /// The rotated refresh token goes into memory at once (so it is never lost) and into the
    /// store before the access token it came with is served.
    func keepRotation(_ refreshToken: String, idToken: String?, of account: Account, chain: String?, resource: String?) async {
        var updated = account
        if let chain {
            updated.resourceRefreshTokens[chain] = refreshToken
        } else {
            updated.refreshToken = refreshToken
            updated.rotatedFor = resource ?? ""
        }
        if let idToken { updated.idToken = idToken }
        updated.unsaved = true
        guard registry.replace(ifStill: updated) else {
            // A reload while the refresh waited removed the provider, or moved it to another
            // issuer or client: the account is not listed again. Its item (which stays) gets
            // the rotated refresh token, so the provider put back is served.
            logger.notice("a refresh answered after a reload forgot its account; the rotated refresh token is only stored", metadata: ["account": "\(account.key)"])
            do {
                try await store.save(AccountSecret.credential(for: updated))
            } catch {
                logger.error("the rotated refresh token of an account a reload forgot could not be written to the store", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            }
            return
        }
        do {
            try await store.save(AccountSecret.credential(for: updated))
            registry.update(account.key) {
                $0.unsaved = false
                $0.unsavedBecause = nil
            }
        } catch {
            // The new refresh token stays in memory and is written again until the store
            // takes it; the caller still gets the token the provider issued.
            logger.error("the rotated refresh token could not be written to the store; retrying in the background", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            registry.update(account.key) { $0.unsavedBecause = error }
            retrySave(account.key)
        }
    }

    /// A new ID token that came with a refresh without a rotated refresh token: kept in
    /// memory, and in the store for after a restart (best effort: the one stored before
    /// still names the same account).
    func keepIDToken(_ idToken: String, of key: AccountKey) async {
        registry.update(key) { $0.idToken = idToken }
        guard let updated = registry[key], !updated.unsaved else { return }  // the retry loop writes it
        do {
            try await store.save(AccountSecret.credential(for: updated))
        } catch {
            logger.notice("the new ID token could not be written to the store; the one stored before is kept there", metadata: ["account": "\(key)", "error": "\(error.message)"])
        }
    }

    /// A new DPoP key, in memory at once and stored before its first use (the provider may
    /// bind the next refresh token to it); a store that refuses it leaves the account
    /// unsaved and written in the background. Machine accounts store nothing. Returns the
    /// account as it is now.
    func keepDPoPKey(of updated: Account) async -> Account {
        var updated = updated
        registry.update(updated.key) { $0.dpop = updated.dpop }
        guard !updated.machine else { return updated }
        do {
            try await store.save(AccountSecret.credential(for: updated))
        } catch {
            updated.unsaved = true
            registry.update(updated.key) {
                $0.unsaved = true
                $0.unsavedBecause = error
            }
            logger.error("the new DPoP key could not be written to the store; retrying in the background", metadata: ["account": "\(updated.key)", "error": "\(error.message)"])
            retrySave(updated.key)
        }
        return updated
    }

    /// Writes an account whose newest refresh token is only in memory until the store takes
    /// it (every 5 s), in turn with the account's refreshes. One retry loop per account.
    func retrySave(_ key: AccountKey) {
        guard resaving.withLock({ $0.insert(key).inserted }) else { return }
        Task {
            defer { _ = resaving.withLock { $0.remove(key) } }
            while true {
                try? await Task.sleep(for: .seconds(5))
                if await storeUnsavedInTurn(key) == nil { return }
            }
        }
    }

    /// `storeUnsaved`, in turn with the account's refreshes (a reload that forgets the
    /// account, the background retry).
    func storeUnsavedInTurn(_ key: AccountKey) async -> StoreError? {
        await turn(of: key).exclusive { await self.storeUnsaved(key) }
    }

    /// Writes the account's newest refresh token when only memory holds it (the store
    /// refused it at rotation); call in turn with the account's refreshes. Nil once it is
    /// stored (or was already), else the store's refusal.
    func storeUnsaved(_ key: AccountKey) async -> StoreError? {
        guard let current = registry[key], current.unsaved else { return nil }
        do throws(StoreError) {
            try await store.save(AccountSecret.credential(for: current))
        } catch {
            registry.update(key) { $0.unsavedBecause = error }
            return error
        }
        registry.update(key) {
            $0.unsaved = false
            $0.unsavedBecause = nil
        }
        logger.notice("the newest refresh token is stored now", metadata: ["account": "\(key)"])
        return nil
    }

    /// Before the daemon stops: waits for each account's refresh in flight (one reading a
    /// provider's late answer for at most `Refresher.lateAnswerAtStop`, then cut off, said
    /// in the log), then writes once more every newest refresh token the store has not
    /// taken yet (the background retry ends with the process, and a restart would read the
    /// older, rotated-away one). Returns the accounts whose newest refresh token is still
    /// not stored.
    func saveUnsaved() async -> [AccountKey] {
        let all = turns.all
        return await withTaskGroup(of: AccountKey?.self) { group in
            for (key, queue) in all {
                group.addTask {
                    await self.turns.settle(queue, of: key, stopping: true)
                    guard let error = await queue.exclusive({ await self.storeUnsaved(key) }) else { return nil }
                    self.logger.error("stopping with the newest refresh token only in memory: the store did not take it, so after a restart this account may need a new sign-in", metadata: ["account": "\(key)", "error": "\(error.message)"])
                    return key
                }
            }
            var unsaved: [AccountKey] = []
            for await key in group { if let key { unsaved.append(key) } }
            return unsaved
        }
    }
}
