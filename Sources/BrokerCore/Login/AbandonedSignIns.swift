import Synchronization

/// Paces sign-ins on demand that programs start and then abandon (hang up before the user
/// finished). Each such sign-in may show a desktop notification and open a loopback port:
/// a program that asks and hangs up in a loop must not flood the user with them.
///
/// A provider's first `free` abandoned sign-ins in a row cost nothing; after those, the
/// next sign-in on demand waits `firstPause` seconds from the last abandonment, doubling
/// with each further one up to `longestPause`. A sign-in that finishes (signed in, or
/// refused by the user or the provider) starts the count again. `authctl login` is never
/// paced: the user asked for it.
final class AbandonedSignIns: Sendable {
    static let free = 3
    static let firstPause: Double = 30
    static let longestPause: Double = 600

    private struct Record {
        var inARow: Int
        var last: Double
    }

    private let records = Mutex<[String: Record]>([:])

    /// An on-demand sign-in to `provider` was abandoned at `now`; returns how many in a row.
    @discardableResult
    func abandoned(provider: String, now: Double) -> Int {
        records.withLock { all in
            var record = all[provider] ?? Record(inARow: 0, last: now)
            record.inARow += 1
            record.last = now
            all[provider] = record
            return record.inARow
        }
    }

    /// A sign-in to `provider` came to an end someone heard: the pace starts over.
    func finished(provider: String) {
        _ = records.withLock { $0.removeValue(forKey: provider) }
    }

    /// Seconds until a new sign-in on demand to `provider` may start; nil when it may now.
    func pause(provider: String, now: Double) -> Double? {
        records.withLock { all -> Double? in
            guard let record = all[provider], record.inARow >= Self.free else { return nil }
            let doublings = min(record.inARow - Self.free, 16)
            let pause = min(Self.firstPause * Double(1 << doublings), Self.longestPause)
            let left = record.last + pause - now
            return left > 0 ? left : nil
        }
    }
}
