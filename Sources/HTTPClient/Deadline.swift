import Glibc

/// A point on the monotonic clock by which the whole request must be done.
struct Deadline: Sendable {
    private let nanoseconds: UInt64

    /// `seconds` from now (at least 0).
    init(secondsFromNow seconds: Double) {
        let span = seconds.isFinite ? max(0, min(seconds, 86_400 * 365)) : 86_400 * 365
        nanoseconds = Self.now() &+ UInt64(span * 1_000_000_000)
    }

    /// Milliseconds left, rounded up so a deadline still ahead never polls with 0; 0 once passed.
    var remainingMilliseconds: Int32 {
        let now = Self.now()
        guard nanoseconds > now else { return 0 }
        return Int32(min((nanoseconds - now + 999_999) / 1_000_000, UInt64(Int32.max)))
    }

    var hasPassed: Bool { Self.now() >= nanoseconds }

    /// The point halfway from now to this deadline (now, once it has passed).
    var halfway: Deadline {
        let now = Self.now()
        return Deadline(nanoseconds: nanoseconds > now ? now + (nanoseconds - now) / 2 : now)
    }

    private init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
