/// One connection's allowance of requests to the provider (`[daemon]
/// cache_misses_per_minute`, charged through `ConnectionAllowance`): each costs the
/// provider, and in the default `access_tokens = "one-per-refresh-token"` a refresh drops
/// the account's other tokens, which other programs then have to refresh in turn. A token
/// bucket: full at first, refilled evenly over a minute. A value (its owner locks it);
/// tests drive it with any clock.
struct MissBudget {
    private var available: Double?
    private var last: UInt64 = 0

    /// Takes one miss at `now` (nanoseconds, monotonic) under a limit of `perMinute`:
    /// nil when taken, else the whole seconds until one is available again.
    mutating func take(perMinute: Int, now: UInt64) -> Int? {
        guard perMinute > 0 else { return nil }
        let capacity = Double(perMinute)
        var refilled = capacity  // a new connection starts with the whole minute's worth
        if let available {
            refilled = min(capacity, available + Double(now &- last) / 1e9 * capacity / 60)
        }
        last = now
        if refilled >= 1 {
            available = refilled - 1
            return nil
        }
        available = refilled
        return max(1, Int(((1 - refilled) * 60 / capacity).rounded(.up)))
    }
}
