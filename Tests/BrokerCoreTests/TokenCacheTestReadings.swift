@testable import BrokerCore

/// The cache read with both clocks at one number, as tests whose clocks agree do. Only the
/// tests have these: the daemon always passes a `ClockReading`, read from `WallClock`.
extension TokenCache {
    func lookup(_ key: CacheKey, now: Double, minimumLife: Double) -> CachedToken? {
        lookup(key, now: .both(now), minimumLife: minimumLife)
    }

    func store(_ token: CachedToken, for key: CacheKey, now: Double, owner: ProgramShare? = Requester.share) {
        store(token, for: key, now: .both(now), owner: owner)
    }

    func makeRoom(for key: CacheKey, owner: ProgramShare?, limit: Int, now: Double) -> Bool {
        makeRoom(for: key, owner: owner, limit: limit, now: .both(now))
    }
}
