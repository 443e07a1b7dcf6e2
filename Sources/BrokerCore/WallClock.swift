#if canImport(Glibc)
import Glibc
#endif

/// Unix time in seconds with sub-second precision. Injected into the broker so tests can
/// move time.
public struct WallClock: Sendable {
    public var now: @Sendable () -> Double

    public init(now: @escaping @Sendable () -> Double) { self.now = now }

    public static let system = WallClock {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
