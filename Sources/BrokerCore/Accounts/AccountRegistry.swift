import Synchronization

/// The accounts the daemon knows, by key. Every read is a copy taken under a lock, so
/// cache hits on event-loop threads never wait for an actor.
final class AccountRegistry: Sendable {
    private let accounts = Mutex<[AccountKey: Account]>([:])

    subscript(key: AccountKey) -> Account? {
        accounts.withLock { $0[key] }
    }

    func put(_ account: Account) {
        accounts.withLock { $0[account.key] = account }
    }

    @discardableResult
    func remove(_ key: AccountKey) -> Account? {
        accounts.withLock { $0.removeValue(forKey: key) }
    }

    func update(_ key: AccountKey, _ change: (inout Account) -> Void) {
        accounts.withLock { all in
            if var a = all[key] {
                change(&a)
                all[key] = a
            }
        }
    }

    /// The account a token request means, for the cache-hit path: the only account of
    /// `provider` (no name given), or the only one whose subject, username or display name is `name`.
    /// Nil when there is none or more than one; the caller then takes the full path, which
    /// says why. Builds no array: a cache hit costs a look at each account, not a sorted copy.
    func resolve(provider: String, named name: String?) -> Account? {
        accounts.withLock { all in
            var found: Account?
            for account in all.values where account.key.provider == provider {
                if let name, !account.isNamed(name) { continue }
                if found != nil { return nil }
                found = account
            }
            return found
        }
    }

    /// The accounts of one provider, or of all, sorted for stable listings.
    func list(provider: String? = nil) -> [Account] {
        accounts.withLock { all in
            all.values.filter { provider == nil || $0.key.provider == provider }
        }.sorted { ($0.key.provider, $0.key.subject) < ($1.key.provider, $1.key.subject) }
    }
}
