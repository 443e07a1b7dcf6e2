import BrokerCore
import Synchronization

/// One connection's `cache_misses_per_minute`, as the services charge it: the token work of
/// the connection's requests (`MethodSpec.mints`) runs with it as `ProviderRequests.allowance`,
/// and each request the daemon sends to a provider for them takes one from its
/// `MissBudget`. Made once per connection; the cache-hit path never touches it.
final class ConnectionAllowance: ProviderRequestAllowance {
    private let budget = Mutex(MissBudget())
    /// The limit in force, read at each charge so a reload applies to open connections too.
    private let perMinute: @Sendable () -> Int

    init(perMinute: @escaping @Sendable () -> Int) { self.perMinute = perMinute }

    func take() -> ProviderRequestsSpent? {
        let limit = perMinute()
        let now = ServerActivity.monotonicNanoseconds()
        guard let wait = budget.withLock({ $0.take(perMinute: limit, now: now) }) else { return nil }
        return ProviderRequestsSpent(limit: limit, retryAfter: wait)
    }
}
