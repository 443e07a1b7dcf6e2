#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// What the server is doing right now, so the daemon can tell when it is idle: open
/// connections, requests still being worked on (a refresh outlives a caller that hung up,
/// and must finish storing its rotated refresh token), and when anything last happened.
public final class ServerActivity: Sendable {
    private let connections = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)
    /// CLOCK_MONOTONIC nanoseconds of the last connection, request or answer.
    private let last = Atomic<UInt64>(ServerActivity.monotonicNanoseconds())

    public init() {}

    /// Connections open now.
    public var openConnections: Int { connections.load(ordering: .relaxed) }

    /// Requests being worked on now.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }

    /// CLOCK_MONOTONIC nanoseconds of the last connection opened or closed, request or
    /// answer: changes whenever anything happened.
    public var lastActivity: UInt64 { last.load(ordering: .relaxed) }

    /// Seconds since the last connection opened or closed, or a request arrived or was answered.
    public var secondsSinceLastActivity: Double {
        let now = Self.monotonicNanoseconds()
        let then = last.load(ordering: .relaxed)
        return now > then ? Double(now - then) / 1e9 : 0
    }

    func opened() {
        connections.wrappingAdd(1, ordering: .relaxed)
        touch()
    }

    func closed() {
        connections.wrappingSubtract(1, ordering: .relaxed)
        touch()
    }

    func started() {
        inFlight.wrappingAdd(1, ordering: .relaxed)
        touch()
    }

    func finished() {
        inFlight.wrappingSubtract(1, ordering: .relaxed)
        touch()
    }

    func touch() {
        last.store(Self.monotonicNanoseconds(), ordering: .relaxed)
    }

    /// The monotonic clock: idle time must not jump with the wall clock.
    static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
