#if canImport(Glibc)
import Glibc
#endif

/// The broker's two clocks, injected so tests can move each on its own.
///
/// `now` is the wall clock (CLOCK_REALTIME, Unix seconds): what goes on the wire
/// (`expires_at`), what JWT `exp`, `iat` and HTTP dates are read against. NTP, an
/// administrator or a virtual machine's resume can step it either way.
///
/// `boottime` is CLOCK_BOOTTIME (seconds since boot): it never steps, and a suspend counts
/// as time passed. Every deadline the broker keeps for itself counts on it: token
/// lifetimes, refresh-ahead, back-off, sign-in deadlines, leases and the discovery document's age
/// (docs/architecture.md, "Two clocks"). A token's life is counted on it from the moment
/// its request was sent, and on the wall clock against its JWT `exp`, whichever ends first.
public struct WallClock: Sendable {
    public var now: @Sendable () -> Double
    public var boottime: @Sendable () -> Double

    public init(now: @escaping @Sendable () -> Double, boottime: @escaping @Sendable () -> Double) {
        self.now = now
        self.boottime = boottime
    }

    /// One clock read as both: tests that do not step the wall clock on its own.
    public init(now: @escaping @Sendable () -> Double) {
        self.now = now
        self.boottime = now
    }

    /// Both clocks, read one after the other.
    public func reading() -> ClockReading { ClockReading(wall: now(), boot: boottime()) }

    public static let system = WallClock(now: { read(CLOCK_REALTIME) }, boottime: { read(CLOCK_BOOTTIME) })

    private static func read(_ id: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(id, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Both clocks at one moment: the wall clock (Unix seconds) and CLOCK_BOOTTIME.
public struct ClockReading: Sendable, Equatable {
    public var wall: Double
    public var boot: Double

    public init(wall: Double, boot: Double) {
        self.wall = wall
        self.boot = boot
    }

    /// Both clocks at `seconds` (tests, and code that never steps the wall clock).
    public static func both(_ seconds: Double) -> ClockReading { ClockReading(wall: seconds, boot: seconds) }

    /// Wall clock minus boot time: constant while the wall clock does not step (a suspend
    /// moves both), so a boot-time deadline plus it is the deadline on the wall clock.
    public var offset: Double { wall - boot }
}
