@testable import BrokerCore
import BrokerProtocol
import XCTest

/// Deadlines on a clock that does not step (issue 37, item 2). Token lifetimes, refresh-ahead
/// and back-off count on CLOCK_BOOTTIME; the wall clock is what `expires_at` and a JWT's
/// `exp` are read on. The harness's `TestClock` moves them apart: `stepWall` is NTP (or an
/// administrator) stepping the wall clock alone, `advance` time passing (a suspend too).
/// The issue's measurement: a 10-minute step backwards served tokens past their `exp` for
/// ten minutes (`expires_at` − `exp` = 599 s), and refused a provider that answered again
/// with "try again in 576 s".
final class ClockStepTests: XCTestCase {
    /// What a clock that was never stepped reads: the resource server's, the provider's.
    private func trueTime(_ h: BrokerHarness, stepped: Double) -> Double { h.clock.now - stepped }

    func testABackwardsStepOfTenMinutesServesNoTokenPastItsExp() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let issued = Int64(h.clock.now)
        let exp = Double(issued + 3600)
        h.transport.answerAlways(.jwt(issuedAt: issued, life: 3600, expiresIn: 3600))
        let first = try await h.token()
        XCTAssertLessThanOrEqual(Double(first.expiresAt), exp)

        h.clock.stepWall(-600)
        // expires_at moves with the wall clock: the same instant, read on the stepped clock.
        let after = try await h.token()
        XCTAssertEqual(after.accessToken, first.accessToken)
        XCTAssertEqual(after.expiresAt, first.expiresAt - 600, "expires_at is the deadline on the stepped wall clock")
        let cached = try XCTUnwrap(h.broker.tokens.cachedToken(TokenGetParams()))
        XCTAssertEqual(cached.expiresAt, first.expiresAt - 600, "the cache hit's answer too")

        // The provider goes away, so only the cache serves; time passes past the true exp.
        h.transport.down = true
        var served = 0
        while trueTime(h, stepped: -600) < exp + 700 {
            h.clock.advance(7)
            guard let token = try? await h.token() else { continue }
            served += 1
            XCTAssertLessThan(trueTime(h, stepped: -600), exp - TokenCache.reserve,
                              "a token served \(trueTime(h, stepped: -600) - exp) s past its exp")
            XCTAssertLessThanOrEqual(Double(token.expiresAt) - h.clock.now, exp - trueTime(h, stepped: -600),
                                     "expires_at promises no more life than the token has")
        }
        XCTAssertGreaterThan(served, 400, "the cached token is served while the provider is down, up to its exp")
    }

    /// A device code lives its `expires_in` on CLOCK_BOOTTIME: NTP stepping the wall clock
    /// an hour forward while the user reads the code on the phone ends no sign-in (before:
    /// the next poll said "the code expired"), and `expires_at` is the wall clock's.
    func testAWallClockStepForwardEndsNoDeviceSignIn() async throws {
        let h = try await BrokerHarness()
        h.transport.discoveryExtra = #","device_authorization_endpoint":"\#(StubTransport.issuer)/device""#
        h.transport.answerAlways(.error("authorization_pending"))
        let started = try await h.broker.signIns.startLogin(LoginStartParams(flow: .device))
        XCTAssertEqual(started.expiresAt, Int64(h.clock.now) + 600)
        h.clock.stepWall(3600)
        let polled = h.transport.tokenRequests.count
        let pending = Task { try await h.broker.signIns.waitLogin(LoginWaitParams(loginID: started.loginID)) }
        // Two polls (one a second) after the step: each one asked, none gave up.
        for _ in 0..<100 where h.transport.tokenRequests.count < polled + 2 { try await Task.sleep(for: .milliseconds(50)) }
        XCTAssertGreaterThanOrEqual(h.transport.tokenRequests.count, polled + 2, "the sign-in stopped polling")
        pending.cancel()
        do {
            _ = try await pending.value
            XCTFail("the stub never approves")
        } catch {
            XCTAssertFalse(error.localizedDescription.contains("expired") || "\(error)".contains("expired"), "\(error)")
        }
    }

    func testABackwardsStepDoesNotLengthenTheBackOff() async throws {
        let h = try await BrokerHarness()
        h.transport.down = true
        guard case .providerUnreachable(_, let first, _) = await h.tokenError() else { return XCTFail("expected -32004") }
        XCTAssertEqual(first, 1)
        h.clock.stepWall(-600)
        guard case .providerUnreachable(_, let waiting, let message) = await h.tokenError() else { return XCTFail("expected -32004") }
        XCTAssertLessThanOrEqual(waiting, 1, message)
        h.transport.down = false
        h.clock.advance(1.1)
        let token = try await h.token()
        XCTAssertEqual(token.expiresAt, Int64(h.clock.now) - 1 + 3600, "counted from the send on the stepped clock")
    }

    func testAForwardStepOfTheWallClockAloneEndsAJWTAtItsExpByThisComputersClock() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let issued = Int64(h.clock.now)
        h.transport.script(.jwt(issuedAt: issued, life: 3600, expiresIn: 3600))
        let first = try await h.token()
        XCTAssertEqual(first.expiresAt, issued + 3600 - 1)
        // Stepped 50 minutes ahead: by boot time the token has nearly the whole hour left,
        // by this computer's wall clock its exp is 10 minutes away, and expires_at is exp.
        h.clock.stepWall(3000)
        let ahead = try await h.token()
        XCTAssertEqual(ahead.accessToken, first.accessToken)
        XCTAssertEqual(ahead.expiresAt, issued + 3600, "never later than the JWT's exp")
        // Another 10 minutes: past exp on this computer's clock, so it is refreshed, not served.
        h.clock.stepWall(600)
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()))
        let refreshed = try await h.token()
        XCTAssertNotEqual(refreshed.accessToken, first.accessToken)
    }

    func testAForwardStepOfTheWallClockAloneKeepsAnOpaqueTokensLife() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let first = try await h.token()
        h.clock.stepWall(3000)
        // An opaque token lives its expires_in from the send, on boot time.
        let later = try await h.token()
        XCTAssertEqual(later.accessToken, first.accessToken)
        XCTAssertEqual(later.expiresAt, first.expiresAt + 3000)
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
    }

    func testASuspendCountsOnBothClocks() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let first = try await h.token()
        h.clock.advance(7200)  // two hours suspended: both clocks moved
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()))
        let after = try await h.token()
        XCTAssertNotEqual(after.accessToken, first.accessToken)
        XCTAssertEqual(after.expiresAt, Int64(h.clock.now) - 1 + 3600)
        // And a back-off started before a suspend is over after it.
        h.transport.down = true
        h.clock.advance(7200)
        _ = await h.tokenError()
        h.clock.advance(600)
        h.transport.down = false
        _ = try await h.token()
    }

    /// A step while the request is out: the deadline counts from the send on boot time,
    /// and `expires_at` at receipt is read on the clock as it is then.
    func testAStepBetweenSendAndReceiptMovesNoDeadline() {
        let sent = ClockReading(wall: 1000.25, boot: 10.25)
        let received = ClockReading(wall: 400.5, boot: 11.5)  // stepped back 600 s in flight
        let expiry = CachedToken.expiry(sent: sent, received: received, expiresIn: 3600, exp: nil)
        XCTAssertEqual(expiry.deadline, 1000 - 1 + 3600 - 990)
        XCTAssertEqual(expiry.expiresAt, (expiry.deadline + received.offset).rounded(.down))
        let jwt = CachedToken.expiry(sent: sent, received: received, expiresIn: 3600, exp: 1000 + 1800)
        XCTAssertEqual(jwt.deadline, 2800 - received.offset, "the JWT's exp through the offset at receipt")
        XCTAssertEqual(jwt.expiresAt, 2800, "never later than exp")
        let token = CachedToken(accessToken: "t", tokenType: "Bearer", expiry: jwt)
        XCTAssertEqual(token.life(at: received), 2800 - 400.5)
        // The wall clock put right again: exp on it still bounds the life.
        let putRight = ClockReading(wall: 1001.5, boot: 11.5)
        XCTAssertEqual(token.life(at: putRight), 2800 - 1001.5)
        XCTAssertEqual(token.expiresAt(at: putRight), 2800)
    }
}
