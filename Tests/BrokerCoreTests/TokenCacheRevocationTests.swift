@testable import BrokerCore
import XCTest

/// The cache's rules for providers that revoke earlier access tokens on a refresh
/// (`access_tokens = "one-per-refresh-token"`) and for `token.reject`.
final class TokenCacheRevocationTests: XCTestCase {
    let alice = AccountKey(provider: "corp", subject: "alice")
    let bob = AccountKey(provider: "corp", subject: "bob")

    func token(_ name: String, chain: String? = nil) -> CachedToken {
        CachedToken(accessToken: name, tokenType: "Bearer", expiresAt: 10_000, scope: nil, chain: chain)
    }

    func testARefreshOfAChainDropsEveryTokenOfThatChainAndNoOther() {
        let cache = TokenCache()
        let api = CacheKey(account: alice, resource: "https://api", scopes: [])
        let git = CacheKey(account: alice, resource: "https://git", scopes: ["read"])
        let audience = CacheKey(account: alice, resource: nil, scopes: [])
        let own = CacheKey(account: alice, resource: "https://own", scopes: [])
        let other = CacheKey(account: bob, resource: "https://api", scopes: [])
        cache.store(token("api"), for: api, now: 0)
        cache.store(token("git"), for: git, now: 0)
        cache.store(token("aud"), for: audience, now: 0)
        cache.store(token("own", chain: "https://own"), for: own, now: 0)
        cache.store(token("bob"), for: other, now: 0)

        let previous = cache.removeChain(nil, of: alice)
        XCTAssertEqual(previous.mapValues(\.accessToken), [api: "api", git: "git", audience: "aud"])
        for key in [api, git, audience] { XCTAssertNil(cache.lookup(key, now: 0, minimumLife: 0)) }
        XCTAssertEqual(cache.lookup(own, now: 0, minimumLife: 0)?.accessToken, "own", "another chain's token lives on")
        XCTAssertEqual(cache.lookup(other, now: 0, minimumLife: 0)?.accessToken, "bob", "another account's token lives on")

        // A refresh that failed before reaching the provider puts the chain's tokens back,
        // each unless something newer is there by then.
        cache.restore(previous)
        XCTAssertEqual(cache.lookup(git, now: 0, minimumLife: 0)?.accessToken, "git")
        XCTAssertEqual(cache.lookup(api, now: 0, minimumLife: 0)?.accessToken, "api")
        cache.store(token("git2"), for: git, now: 0)
        cache.restore(previous)
        XCTAssertEqual(cache.lookup(git, now: 0, minimumLife: 0)?.accessToken, "git2")
    }

    func testARejectionDropsOnlyTheTokenItNames() {
        let cache = TokenCache()
        let api = CacheKey(account: alice, resource: "https://api", scopes: [])
        cache.store(token("old"), for: api, now: 0)
        XCTAssertEqual(cache.key(holding: "old"), api)
        cache.store(token("new"), for: api, now: 0)
        XCTAssertNil(cache.key(holding: "old"))
        XCTAssertFalse(cache.remove(api, ifHolding: "old"), "a refresh since replaced it: the new token stays")
        XCTAssertEqual(cache.lookup(api, now: 0, minimumLife: 0)?.accessToken, "new")
        XCTAssertTrue(cache.remove(api, ifHolding: "new"))
        XCTAssertNil(cache.lookup(api, now: 0, minimumLife: 0))
        XCTAssertFalse(cache.remove(api))
    }
}
