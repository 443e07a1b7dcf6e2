@testable import BrokerCore
import BrokerProtocol
import XCTest

/// `access_tokens` and `token.reject` through the whole `Broker`: which cached token a
/// caller is served after another refresh of the same account.
final class BrokerRevocationTests: XCTestCase {
    let api = TokenGetParams(resource: "https://api")
    let git = TokenGetParams(resource: "https://git")

    func testByDefaultARefreshForOneResourceRetiresTheOthersCachedTokens() async throws {
        let h = try await BrokerHarness()
        let first = try await h.token(api)
        _ = try await h.token(git)  // the provider revokes `first` as it takes this refresh
        XCTAssertNil(h.broker.tokens.cachedToken(api), "the event-loop path must not serve the revoked token")
        let again = try await h.token(api)
        XCTAssertNotEqual(fingerprint(again.accessToken), fingerprint(first.accessToken))
        XCTAssertEqual(h.transport.tokenRequests.count, 3)
        // The same key again is a cache hit as always.
        XCTAssertEqual(h.broker.tokens.cachedToken(api).map { fingerprint($0.accessToken) }, fingerprint(again.accessToken))
    }

    func testIndependentTokensAreEachKept() async throws {
        let h = try await BrokerHarness(providerKeys: #"access_tokens = "independent""#)
        let first = try await h.token(api)
        _ = try await h.token(git)
        XCTAssertEqual(h.broker.tokens.cachedToken(api).map { fingerprint($0.accessToken) }, fingerprint(first.accessToken))
        XCTAssertEqual(h.transport.tokenRequests.count, 2)
    }

    func testWhileTheProviderIsDownTheRefreshedKeysOwnTokenIsStillServed() async throws {
        let h = try await BrokerHarness()
        let first = try await h.token(api)
        h.transport.down = true
        h.clock.advance(3600 - 30)  // inside the margin: a refresh is tried, and fails
        let stale = try await h.token(api)
        XCTAssertEqual(fingerprint(stale.accessToken), fingerprint(first.accessToken))
    }

    /// A refresh for one resource that never reached the provider revoked nothing: the
    /// chain's live token for another resource is still served while the provider is down.
    func testARefreshThatNeverReachedTheProviderLeavesTheOtherResourcesTokenServed() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token(api)
        let live = try await h.token(git)  // the provider revokes api's token as it takes this refresh
        h.transport.down = true
        let error = await h.tokenError(api)  // api's token must be refreshed, and cannot be
        guard case .providerUnreachable = error else { return XCTFail("expected provider unreachable, got \(String(describing: error))") }
        let served = try await h.token(git)
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint(live.accessToken),
                       "git's token, still valid at the provider, was not served while the provider is down")
    }

    func testARejectedTokenIsNeverServedAgain() async throws {
        let h = try await BrokerHarness(providerKeys: #"access_tokens = "independent""#)
        let first = try await h.token(api)
        XCTAssertEqual(try h.broker.tokens.rejectToken(TokenRejectParams(accessToken: first.accessToken)), TokenRejectResult(dropped: true))
        XCTAssertNil(h.broker.tokens.cachedToken(api))
        let fresh = try await h.token(api)
        XCTAssertNotEqual(fingerprint(fresh.accessToken), fingerprint(first.accessToken))
        // Rejected by key: the same.
        XCTAssertEqual(try h.broker.tokens.rejectToken(TokenRejectParams(key: api)), TokenRejectResult(dropped: true))
        XCTAssertEqual(try h.broker.tokens.rejectToken(TokenRejectParams(key: api)), TokenRejectResult(dropped: false))
        XCTAssertThrowsError(try h.broker.tokens.rejectToken(TokenRejectParams(accessToken: "x", resource: "https://api")))
    }
}
