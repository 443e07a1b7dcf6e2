import Synchronization

/// The accounts the daemon knows, by key. Every read is a copy taken under a lock, so
/// cache hits on event-loop threads never wait for an actor.
final class AccountRegistry: Sendable {
    /// Every put, removal, replacement or update counts as a change (`TokensService.generation`).
    private let accounts = CountedMutex<[AccountKey: Account]>([:])

    /// Changes with every put, removal, replacement or update (never goes back).
    var generation: UInt64 { accounts.generation }

    subscript(key: AccountKey) -> Account? {
        accounts.withLock { $0[key] }
    }

    func put(_ account: Account) {
        accounts.changing { $0[account.key] = account }
    }

    /// Puts `account` over the one under its key only while that is still the same account
    /// (same issuer and client): a reload may have forgotten it, or put another client's in
    /// its place, since `account` was read. Returns whether it was put.
    func replace(ifStill account: Account) -> Bool {
        accounts.changing { all in
            guard let known = all[account.key], known.issuer == account.issuer, known.clientID == account.clientID else { return false }
            all[account.key] = account
            return true
        }
    }

    @discardableResult
    func remove(_ key: AccountKey) -> Account? {
        accounts.changing { $0.removeValue(forKey: key) }
    }

    /// Replaces every account of `providers` with what `next` makes of them, in one step
    /// under the lock: a reader sees the accounts before or after, never none in between.
    /// Returns the accounts that were there before and are gone now.
    @discardableResult
    func replace(providers: Set<String>, _ next: ([Account]) -> [Account]) -> [Account] {
        accounts.changing { all in
            let before = all.values.filter { providers.contains($0.key.provider) }
            let after = next(before)
            for account in before { all[account.key] = nil }
            for account in after { all[account.key] = account }
            let kept = Set(after.map(\.key))
            return before.filter { !kept.contains($0.key) }
        }
    }

    func update(_ key: AccountKey, _ change: (inout Account) -> Void) {
        accounts.changing { all in
            if var a = all[key] {
                change(&a)
                all[key] = a
            }
        }
    }

    /// How many accounts fit a request's `account`.
    enum Match {
        case one(Account)
        case none
        case several
    }

    /// The account a request means: the only account of `provider` (no name given), the one
    /// whose subject is `name`, or the only one whose username or display name is `name`. Builds no array:
    /// every token request, cache hits included, costs a look at each account, not a copy.
    func match(provider: String, named name: String?) -> Match {
        accounts.withLock { all in
            var found: Account?
            var count = 0
            for account in all.values where account.key.provider == provider {
                if let name {
                    // A subject is unique per provider; a username need not be.
                    if account.key.subject == name { return .one(account) }
                    if !account.isNamed(name) { continue }
                }
                count += 1
                if found == nil { found = account }
                if name == nil && count > 1 { return .several }
            }
            guard let found else { return .none }
            return count == 1 ? .one(found) : .several
        }
    }

    /// The accounts of one provider, or of all, sorted for stable listings.
    func list(provider: String? = nil) -> [Account] {
        accounts.withLock { all in
            all.values.filter { provider == nil || $0.key.provider == provider }
        }.sorted { ($0.key.provider, $0.key.subject) < ($1.key.provider, $1.key.subject) }
    }
}
