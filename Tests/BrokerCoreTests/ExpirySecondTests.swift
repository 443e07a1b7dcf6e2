@testable import BrokerCore
import BrokerProtocol
import XCTest

/// The expiry second (issue 24, item 4): providers compute `exp` in whole seconds from when
/// they took the request, by a clock that may be a little behind ours, so a token is
/// counted from the whole second before the one its request was sent in, and never served
/// with less than a second left, not even from the cache while the provider is down.
final class ExpirySecondTests: XCTestCase {
    /// The harness's clock starts on a whole second; these tests send the request 0.7 s
    /// into one, where a provider's `exp` is that whole second + expires_in.
    private static let intoTheSecond = 0.7

    func testExpiresAtCountsFromTheWholeSecondBeforeTheRequestWasSent() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let sentInSecond = Int64(h.clock.now)
        h.clock.advance(Self.intoTheSecond)
        let first = try await h.token()
        XCTAssertEqual(first.expiresAt, sentInSecond - 1 + 3600,
                       "the provider's exp if its clock is up to a second behind: the second before + expires_in")
        // The token's life is what the provider says, not 1.7 s more: with 59.5 s left by the
        // count of a provider a second behind (61.2 s by the send time) it is inside the 60 s
        // margin.
        h.clock.advance(3600 - 60.5 - Self.intoTheSecond)
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()), "59.5 s to the earliest exp is inside a 60 s margin")
    }

    func testWhileTheProviderIsDownNoTokenIsServedInItsLastSecondOrAfterItsExp() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let exp = Double(Int64(h.clock.now)) + 3600 - 1  // the earliest the provider's exp can be
        h.clock.advance(Self.intoTheSecond)
        let first = try await h.token()
        XCTAssertEqual(Double(first.expiresAt), exp)
        h.transport.down = true

        // 1.5 s before exp: still served, and its expires_at is still ahead.
        h.clock.advance(exp - 1.5 - h.clock.now)
        let stale = try await h.token()
        XCTAssertEqual(fingerprint(stale.accessToken), fingerprint(first.accessToken))
        XCTAssertGreaterThan(Double(stale.expiresAt), h.clock.now + 1)

        // 0.5 s before exp: less than the reserve second left, never served.
        h.clock.advance(1)  // past the 1 s back-off of the first failure as well
        let late = await h.tokenError()
        guard case .providerUnreachable = late else { return XCTFail("expected provider unreachable, got \(String(describing: late))") }

        // 0.3 s after exp (by the provider's count; still 1.4 s before by the send time's).
        h.clock.advance(0.8)
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()))
        for _ in 0..<3 {
            h.clock.advance(2.5)
            if let served = try? await h.token() {
                XCTFail("a token was served \(h.clock.now - exp) s after its exp (expires_at \(served.expiresAt))")
            }
        }
    }

    /// A provider that issues tokens living 0–2 s (expires_in): spent on issue, not answered
    /// late. One refresh per request, not two; the provider's fault (-32004 with its
    /// back-off, as for any token answer that cannot be used), not the caller's -32602.
    func testATokenThatLivesNoMoreThanTheReserveSecondIsNeverServed() async throws {
        for expiresIn in [0, 1, 2] {
            let h = try await BrokerHarness(refreshMargin: 0)
            h.clock.advance(Self.intoTheSecond)
            h.transport.answerAlways(.token(expiresIn: expiresIn, rotate: false))
            let error = await h.tokenError()
            guard case .providerUnreachable(_, let retryAfter, let message) = error else {
                return XCTFail("expires_in \(expiresIn): expected the provider's fault, got \(String(describing: error))")
            }
            XCTAssertTrue(message.contains("lives \(expiresIn) s") && message.contains("at the provider"), message)
            XCTAssertEqual(h.transport.tokenRequests.count, 1, "expires_in \(expiresIn): one refresh per request")
            XCTAssertEqual(h.logs.matching("too late"), [], "the provider did not answer late")
            // Within the back-off the provider is not asked again.
            XCTAssertGreaterThan(retryAfter, 0)
            _ = await h.tokenError()
            XCTAssertEqual(h.transport.tokenRequests.count, 1)
        }
    }

    /// A refresh answer without `expires_in` whose access token is a JWT (RFC 9068) that
    /// lives 60 s: the token's own lifetime counts, not the 300 s assumed for an opaque one.
    /// `iat` and `exp` are read by the provider's clock, here an hour ahead of ours.
    func testWithoutExpiresInAJWTAccessTokenIsNeverServedPastItsOwnExp() async throws {
        let h = try await BrokerHarness(refreshMargin: 10)
        let now = Int64(h.clock.now)
        for (providerClock, resource) in [(now, "https://api"), (now + 3600, "https://git")] {
            let request = TokenGetParams(resource: resource)
            h.transport.script(.jwt(issuedAt: providerClock, life: 60))
            h.clock.advance(Self.intoTheSecond)
            let first = try await h.token(request)
            XCTAssertLessThanOrEqual(first.expiresAt, Int64(h.clock.now) + 60,
                                     "expires_at is never later than the token's own exp")
            XCTAssertGreaterThan(Double(first.expiresAt), h.clock.now + 10, "nor counted as spent at once")
            h.clock.advance(55)  // 5 s before its exp, inside the 10 s margin
            let next = try await h.token(request)
            XCTAssertNotEqual(fingerprint(next.accessToken), fingerprint(first.accessToken),
                              "a token was served with 5 s left to its exp, inside the 10 s margin, or after it")
            h.clock.advance(600)
        }
    }

    func testTheCacheKeepsOneSecondInReserveWhateverTheMinimumAskedFor() {
        let cache = TokenCache()
        let now = 1_800_000_000.0
        let key = CacheKey(account: AccountKey(provider: "corp", subject: "sub-alice"), resource: nil, scopes: [])
        cache.store(CachedToken(accessToken: "a", tokenType: "Bearer", expiresAt: now + 10), for: key, now: now)
        XCTAssertNotNil(cache.lookup(key, now: now + 8.9, minimumLife: 0))
        XCTAssertNil(cache.lookup(key, now: now + 9.0, minimumLife: 0))
        XCTAssertNil(cache.lookup(key, now: now + 9.5, minimumLife: 0))
    }
}
