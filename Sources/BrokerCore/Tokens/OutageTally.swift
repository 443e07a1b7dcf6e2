import Synchronization

/// Counts the requests served from the cache while one provider cannot be reached, so the
/// log gets one line when the first is served and one with the count when the provider
/// answers again, instead of a line per request (thousands in a long outage).
final class OutageTally: Sendable {
    private let served = Mutex(0)

    /// Notes one request served from the cache; true for the first of this outage.
    func servedFromCache() -> Bool {
        served.withLock { count in
            count += 1
            return count == 1
        }
    }

    /// Ends the outage: how many requests were served from the cache during it, or nil if
    /// none was.
    func end() -> Int? {
        served.withLock { count in
            defer { count = 0 }
            return count > 0 ? count : nil
        }
    }
}
