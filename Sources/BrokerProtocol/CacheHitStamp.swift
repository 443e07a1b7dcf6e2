/// What a cache hit's answer rests on, kept beside the answer by the daemon's front door
/// (`AnswerMemo`) so that the same request can be answered with the same bytes while
/// nothing it rests on changed: the daemon's state it was read from, the token's life, and
/// the wall clock's offset from boot time (its `expires_at` was read through it). Never
/// sent, never part of the JSON.
package struct CacheHitStamp: Sendable, Equatable {
    /// The tokens service's generation when the hit was read (`TokensService.generation`):
    /// it changes with every change to the token cache, the accounts or the configuration.
    package var generation: UInt64
    /// The token's deadline on CLOCK_BOOTTIME, as the cache holds it.
    package var deadline: Double
    /// The token's JWT `exp` (Unix seconds); infinity when it is not a JWT.
    package var exp: Double
    /// The wall clock minus boot time when the answer was made: a step of the wall clock
    /// changes the answer's `expires_at`, so the bytes no longer stand.
    package var offset: Double
    /// The life the token must have left to be served for this request: the caller's
    /// `min_ttl`, `refresh_margin` and the cache's reserve second, whichever is longest.
    package var minimumLife: Double

    package init(generation: UInt64, deadline: Double, exp: Double = .infinity, offset: Double = 0, minimumLife: Double) {
        self.generation = generation
        self.deadline = deadline
        self.exp = exp
        self.offset = offset
        self.minimumLife = minimumLife
    }

    /// Whether the token still has the life the request needs at `wall` and `boot`, and
    /// the wall clock has not stepped by `stepNoticed` or more since.
    package func stands(wall: Double, boot: Double, stepNoticed: Double) -> Bool {
        min(deadline - boot, exp - wall) > minimumLife && abs((wall - boot) - offset) < stepNoticed
    }
}
