/// What a cache hit's answer rests on, kept beside the answer by the daemon's front door
/// (`AnswerMemo`) so that the same request can be answered with the same bytes while
/// nothing it rests on changed: the daemon's state it was read from, and the token's life.
/// Never sent, never part of the JSON.
package struct CacheHitStamp: Sendable, Equatable {
    /// The tokens service's generation when the hit was read (`TokensService.generation`):
    /// it changes with every change to the token cache, the accounts or the configuration.
    package var generation: UInt64
    /// The token's expiry (Unix seconds), as the cache holds it.
    package var expiresAt: Double
    /// The life the token must have left to be served for this request: the caller's
    /// `min_ttl`, `refresh_margin` and the cache's reserve second, whichever is longest.
    package var minimumLife: Double

    package init(generation: UInt64, expiresAt: Double, minimumLife: Double) {
        self.generation = generation
        self.expiresAt = expiresAt
        self.minimumLife = minimumLife
    }
}
