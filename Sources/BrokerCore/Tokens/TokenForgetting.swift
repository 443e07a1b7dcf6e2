import SecretStore

/// What other services may do to the tokens service's state: a new sign-in, a sign-out
/// and a reload make an account's cached tokens (and their background refreshes) stale.
/// Built by the composition root over the `TokenCache` and `RefreshAhead` the tokens
/// service owns, so those services see these calls and nothing else of it.
struct TokenForgetting: Sendable {
    private let cache: TokenCache
    private let ahead: RefreshAhead
    /// The leases the user gave (the caller gate's): a sign-out ends its provider's.
    private let leases: LeaseTable?

    init(cache: TokenCache, ahead: RefreshAhead, leases: LeaseTable? = nil) {
        self.cache = cache
        self.ahead = ahead
        self.leases = leases
    }

    /// Drops the account's cached tokens (a new sign-in of it: they belong to the old one).
    func dropCached(_ account: AccountKey) { cache.removeAll(for: account) }

    /// Drops the account's cached tokens and ends their background refreshes (sign-out),
    /// and the leases of its provider: each answered a question about this sign-in's tokens.
    func forget(_ account: AccountKey) {
        ahead.stop(account)
        cache.removeAll(for: account)
        leases?.end(provider: account.provider)
    }

    /// Ends every background refresh (reload, stop): the next requests start them again.
    func stopRefreshingAhead() { ahead.stop() }

    /// Gives the account's refresh in flight `Refresher.lateAnswerAtStop` to end, then
    /// cancels it (a sign-out needs no late answer).
    func cutOffLateAnswers(of account: AccountKey) async {
        await ahead.refresher.cutOffLateAnswers(of: account)
    }

    /// Runs `operation` in turn with the account's refreshes, never beside one (sign-out: a
    /// refresh that ended after it would put the account and its rotated refresh token back).
    func inTurnWithRefreshes<T: Sendable>(of account: AccountKey, _ operation: @escaping @Sendable () async -> T) async -> T {
        await ahead.refresher.queue(for: account).exclusive(operation)
    }
}
