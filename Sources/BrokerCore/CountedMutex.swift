import Synchronization

/// A value under a lock that counts its changes: `generation` moves with every `changing`
/// call and never goes back, so a reader that noted it can tell later, without the lock,
/// whether anything changed since (`TokensService.generation`, `CacheHitStamp`). The
/// token cache, the accounts and the provider table each keep their state in one.
final class CountedMutex<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    private let changes = Atomic<UInt64>(0)

    init(_ initial: Value) {
        value = Mutex(initial)
    }

    /// The number of changes so far.
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Runs `body` under the lock without counting a change: for reads.
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        value.withLock { body(&$0) }
    }

    /// Runs `body` under the lock and counts it as a change, before the lock is let go.
    func changing<T>(_ body: (inout Value) -> T) -> T {
        value.withLock { v in
            let result = body(&v)
            changes.wrappingAdd(1, ordering: .releasing)
            return result
        }
    }
}
