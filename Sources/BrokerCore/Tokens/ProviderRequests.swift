/// What a caller's work may still ask of the providers (`[daemon] cache_misses_per_minute`),
/// charged only for the requests the daemon actually sends on the caller's behalf: a
/// refresh, an exchange, the refresh behind a proof's token. An answer from the cache, from
/// a refresh already in flight that the caller joins, from a provider's back-off or from
/// an error decided locally costs nothing.
///
/// The server sets the allowance around a request's work as a task-local value (one per
/// connection, `RPCHandler`), so the services need no extra parameter and the cache-hit
/// path never reads it. Work with no allowance (the daemon's own background refreshes, a
/// sign-in) is never charged.
public enum ProviderRequests {
    @TaskLocal public static var allowance: (any ProviderRequestAllowance)?

    /// Takes one request from the current allowance, just before a request to a provider
    /// is sent; throws `providerRequestsSpent` when none is left, and nothing is sent.
    static func charge() throws(BrokerError) {
        guard let allowance, let spent = allowance.take() else { return }
        throw BrokerError.providerRequestsSpent(limit: spent.limit, retryAfter: spent.retryAfter)
    }
}

/// A caller's allowance of requests to the providers.
public protocol ProviderRequestAllowance: Sendable {
    /// Takes one request: nil when taken, else the limit and how long until one is left.
    func take() -> ProviderRequestsSpent?
}

/// The allowance is spent: its `limit` per minute, and the whole seconds until one request
/// is allowed again.
public struct ProviderRequestsSpent: Sendable, Equatable {
    public var limit: Int
    public var retryAfter: Int

    public init(limit: Int, retryAfter: Int) {
        self.limit = limit
        self.retryAfter = retryAfter
    }
}
