@testable import BrokerCore
import BrokerProtocol
import Foundation
import XCTest

/// `refresh_ahead`: tokens in use are refreshed in the background before a caller would
/// wait, at the broker over the STUB provider, with the clock moved by the test.
final class RefreshAheadTests: XCTestCase {
    static let keys = """
        refresh_ahead = true
        refresh_ahead_window = 600
        access_tokens = "independent"
        """

    /// Waits (a bounded number of steps) until the STUB provider saw `count` token requests.
    private func waitForTokenRequests(_ h: BrokerHarness, _ count: Int) async throws {
        for _ in 0..<500 where h.transport.tokenRequests.count < count {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func testATokenInUseIsRefreshedBeforeTheMarginSoTheNextCallerDoesNotWait() async throws {
        let h = try await BrokerHarness(refreshMargin: 60, providerKeys: Self.keys)
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))
        let first = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.count, 1)

        // Still in use: asked for again (from the cache) within the 600 s window.
        h.clock.advance(3000)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
        // Past the moment it is refreshed ahead (margin 60 s, 15 s before it), before the margin.
        h.clock.advance(600 - 60 - 10)
        try await waitForTokenRequests(h, 2)
        XCTAssertEqual(h.transport.tokenRequests.count, 2, "the token in use was refreshed in the background")
        XCTAssertEqual(h.transport.tokenRequests.last?["refresh_token"], "refresh-1", "it used the rotated refresh token")

        // The next caller, now inside what would have been the margin, is served from the cache.
        h.clock.advance(5)
        let second = try await h.token()
        XCTAssertNotEqual(second.accessToken, first.accessToken)
        XCTAssertGreaterThan(Double(second.expiresAt) - h.clock.now, 60)
        XCTAssertEqual(h.transport.tokenRequests.count, 2, "the caller did not wait on the provider")
    }

    func testATokenNobodyAskedForRecentlyIsNotRefreshed() async throws {
        let h = try await BrokerHarness(refreshMargin: 60, providerKeys: Self.keys)
        _ = try await h.token()
        h.clock.advance(3600 - 60 - 10)  // asked 3530 s ago: outside the 600 s window
        try await Task.sleep(for: .milliseconds(200))  // twenty ticks of the background task
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
        // Asked again, it is refreshed as usual (the margin is near), and tracked anew.
        h.clock.advance(30)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.count, 2)
    }

    func testSignOutEndsTheBackgroundRefresh() async throws {
        let h = try await BrokerHarness(refreshMargin: 60, providerKeys: Self.keys)
        _ = try await h.token()
        _ = try await h.broker.signOut.logout(LogoutParams(local: true))
        h.clock.advance(3600 - 60 - 10)
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
    }

    func testWithoutRefreshAheadNothingIsRefreshedInTheBackground() async throws {
        let h = try await BrokerHarness(refreshMargin: 60, providerKeys: #"access_tokens = "independent""#)
        _ = try await h.token()
        h.clock.advance(3600 - 60 - 10)
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
    }

    func testRefreshAheadIsRefusedWhereARefreshRevokesTheTokensProgramsHold() throws {
        XCTAssertThrowsError(try ConfigLoader.parse("""
            [providers.corp]
            issuer = "https://idp.example"
            client_id = "authbroker"
            refresh_ahead = true
            """, file: "config.toml")) { error in
            XCTAssertTrue("\(error)".contains("access_tokens = \"independent\""), "\(error)")
        }
    }
}
