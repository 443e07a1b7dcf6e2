@testable import BrokerCore
import BrokerProtocol
import XCTest

/// A cache hit's stamp (`CacheHitStamp`), by which the front door answers the same request
/// again with the same bytes (`AnswerMemo`): it holds exactly while a fresh `cachedToken`
/// of the same request would answer the same, and stops holding with whatever changes
/// that answer — a refresh, a rejection, a sign-out, a reload, the token's life running
/// short — at the broker over the STUB provider and the moved clock.
final class CacheHitStampTests: XCTestCase {
    let api = TokenGetParams(resource: "https://api")

    /// A cache hit of `params` and its stamp.
    private func hit(_ h: BrokerHarness, _ params: TokenGetParams) async throws -> (TokenGetResult, CacheHitStamp) {
        _ = try await h.token(params)
        let result = try XCTUnwrap(h.broker.tokens.cachedToken(params), "a cache hit")
        return (result, try XCTUnwrap(result.cacheHit, "a hit carries its stamp"))
    }

    func testAStampHoldsWhileNothingChangedAndCountsTheHit() async throws {
        let h = try await BrokerHarness()
        let (result, stamp) = try await hit(h, api)
        let before = h.broker.counters.snapshot()
        XCTAssertTrue(h.broker.tokens.stillServes(stamp))
        let after = h.broker.counters.snapshot()
        XCTAssertEqual(after.tokenRequests, before.tokenRequests + 1)
        XCTAssertEqual(after.cacheHits, before.cacheHits + 1)
        // The stamp stands for exactly what a fresh hit answers.
        XCTAssertEqual(h.broker.tokens.cachedToken(api), result)
    }

    func testARefreshOfTheTokenEndsIt() async throws {
        let h = try await BrokerHarness(providerKeys: #"access_tokens = "independent""#)
        let (first, stamp) = try await hit(h, api)
        // A caller that needs more life than the cached token has: the same key is refreshed
        // (the old token still has far more than the margin: only the refresh ends the stamp).
        h.clock.advance(10)
        let refreshed = try await h.token(TokenGetParams(resource: "https://api", minTTL: 3595))
        XCTAssertNotEqual(fingerprint(refreshed.accessToken), fingerprint(first.accessToken))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp), "the token was replaced: the old answer is stale")
    }

    func testAnotherTokenStoredForTheAccountEndsIt() async throws {
        let h = try await BrokerHarness()
        let (_, stamp) = try await hit(h, api)
        _ = try await h.token(TokenGetParams(resource: "https://git"))  // by default this retires the api token
        XCTAssertNil(h.broker.tokens.cachedToken(api))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testARejectionEndsIt() async throws {
        let h = try await BrokerHarness()
        let (first, stamp) = try await hit(h, api)
        XCTAssertEqual(try h.broker.tokens.rejectToken(TokenRejectParams(accessToken: first.accessToken)), TokenRejectResult(dropped: true))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testASignOutEndsIt() async throws {
        let h = try await BrokerHarness()
        let (_, stamp) = try await hit(h, api)
        _ = try await h.broker.signOut.logout(LogoutParams(local: true))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testAnAccountThatMustSignInAgainEndsIt() async throws {
        let h = try await BrokerHarness()
        let (_, stamp) = try await hit(h, api)
        h.broker.accounts.update(AccountKey(provider: "corp", subject: "sub-alice")) { $0.state = .loginRequired }
        XCTAssertNil(h.broker.tokens.cachedToken(api))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testAReloadEndsIt() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let (_, stamp) = try await hit(h, api)
        // A margin longer than the token's life: the cache no longer serves it.
        _ = try await h.broker.reload(try BrokerHarness.config(refreshMargin: 3600))
        XCTAssertNil(h.broker.tokens.cachedToken(api))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testItHoldsAcrossSecondsUntilTheTokensLifeRunsShortAsTheCachesOwnTest() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let (result, stamp) = try await hit(h, api)
        // The answer holds no time of its own (`expires_at` is absolute): seconds later it
        // is the same answer, and the stamp says so.
        h.clock.advance(1.5)
        XCTAssertEqual(h.broker.tokens.cachedToken(api), result)
        XCTAssertTrue(h.broker.tokens.stillServes(stamp))
        // Up to the margin's edge, the stamp and the cache agree at every step.
        let edge = stamp.deadline - 60 - h.clock.boot
        for step in [edge - 0.5, 0.25, 0.25, 0.25] {
            h.clock.advance(step)
            XCTAssertEqual(h.broker.tokens.stillServes(stamp), h.broker.tokens.cachedToken(api) != nil, "at \(h.clock.now)")
        }
        XCTAssertFalse(h.broker.tokens.stillServes(stamp), "past the margin")
    }

    func testAMinTTLIsPartOfTheStamp() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let long = TokenGetParams(resource: "https://api", minTTL: 1800)
        let (_, stamp) = try await hit(h, long)
        h.clock.advance(1800)  // enough for the margin, not for min_ttl
        XCTAssertNil(h.broker.tokens.cachedToken(long))
        XCTAssertFalse(h.broker.tokens.stillServes(stamp))
    }

    func testRefreshAheadHitsCarryNoStampSoEveryRequestIsNoted() async throws {
        let h = try await BrokerHarness(providerKeys: "refresh_ahead = true\naccess_tokens = \"independent\"")
        _ = try await h.token(api)
        let result = try XCTUnwrap(h.broker.tokens.cachedToken(api))
        XCTAssertNil(result.cacheHit)
        await h.broker.stop()
    }
}
