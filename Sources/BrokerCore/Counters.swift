import BrokerProtocol
import Synchronization

/// Counters since start, for `daemon.status`. Lock-free: bumped on every request.
public final class BrokerCounters: Sendable {
    public let requests = Atomic<Int>(0)
    public let tokenRequests = Atomic<Int>(0)
    public let cacheHits = Atomic<Int>(0)
    public let refreshes = Atomic<Int>(0)
    public let providerErrors = Atomic<Int>(0)
    public let errors = Atomic<Int>(0)

    public init() {}

    public func snapshot() -> Counters {
        Counters(
            requests: requests.load(ordering: .relaxed),
            tokenRequests: tokenRequests.load(ordering: .relaxed),
            cacheHits: cacheHits.load(ordering: .relaxed),
            refreshes: refreshes.load(ordering: .relaxed),
            providerErrors: providerErrors.load(ordering: .relaxed),
            errors: errors.load(ordering: .relaxed))
    }
}

extension Atomic where Value == Int {
    /// Adds one; counters need no ordering with other memory.
    public func increment() { wrappingAdd(1, ordering: .relaxed) }
}
