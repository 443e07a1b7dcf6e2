@testable import BrokerCore
import BrokerProtocol
import OAuth
import Synchronization
import XCTest

/// A STUB rotating provider that takes a refresh (the old refresh token is spent, a new one
/// issued) and then answers too late for the broker to hear it, as a provider under load
/// does. It honours a spent refresh token again for `grace` seconds (a reuse grace period,
/// as Okta, Auth0 and Ory Hydra offer). Glewlwyd cannot be made to commit a refresh and then
/// not answer on cue, and has no grace period.
final class LateRotatingProvider: HTTPTransport {
    static let issuer = StubTransport.issuer

    struct State {
        var current = "refresh-0"
        var spentAt: [String: Double] = [:]
        var issued = 0
        /// How many of the next refreshes are taken but answered too late.
        var late = 0
        /// How many of the next refreshes are answered, but only after `waited` seconds.
        var slow = 0
        var expiresIn = 3600
        var refreshes: [String] = []
        /// The deadline each request carried, by URL path ("-" for the transport's own),
        /// and its answer's when it had one.
        var deadlines: [String] = []
        /// Real seconds the next refresh's answer is held after the refresh was taken (a
        /// provider that stalled with it), without moving the test's clock.
        var stall: Double = 0
    }

    let state = Mutex(State())
    private let clock: TestClock
    private let grace: Double
    /// How long the broker waited for a late answer (its deadline), by the test's clock.
    private let waited: Double

    init(clock: TestClock, grace: Double, waited: Double) {
        self.clock = clock
        self.grace = grace
        self.waited = waited
    }

    /// The refresh tokens each refresh request carried, in order.
    var refreshes: [String] { state.withLock { $0.refreshes } }
    var current: String { state.withLock { $0.current } }

    func answerLate(_ count: Int) { state.withLock { $0.late = count } }

    /// The next `count` refreshes are answered after `waited` seconds, with tokens that
    /// live `expiresIn` seconds.
    func answerSlowly(_ count: Int, expiresIn: Int) { state.withLock { $0.slow = count; $0.expiresIn = expiresIn } }

    var deadlines: [String] { state.withLock { $0.deadlines } }

    /// The next refresh is taken at once and answered `seconds` later, in real time.
    func stallNext(_ seconds: Double) { state.withLock { $0.stall = seconds } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let base = Self.issuer
        state.withLock { $0.deadlines.append("\(request.url.dropFirst(base.count)) \(request.timeout.map { "\(Int($0))" } ?? "-")" + (request.answerTimeout.map { " \(Int($0))" } ?? "")) }
        switch request.url {
        case base + "/.well-known/openid-configuration":
            return Self.json(200, #"{"issuer":"\#(base)","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)/jwks"}"#)
        case base + "/token":
            let body = String(decoding: request.body ?? [], as: UTF8.self)
            let presented = body.split(separator: "&").first { $0.hasPrefix("refresh_token=") }.map { String($0.dropFirst(14)) } ?? ""
            let now = clock.now
            let outcome = state.withLock { s -> (issued: String?, late: Bool, slow: Bool, expiresIn: Int) in
                s.refreshes.append(presented)
                let usable = presented == s.current || s.spentAt[presented].map { now - $0 <= grace } == true
                guard usable else { return (nil, false, false, s.expiresIn) }
                s.issued += 1
                let next = "refresh-\(s.issued)"
                s.spentAt[s.current] = s.spentAt[s.current] ?? now
                if presented != s.current { s.spentAt[presented] = s.spentAt[presented] ?? now }
                s.current = next
                if s.slow > 0 {
                    s.slow -= 1
                    return (next, false, true, s.expiresIn)
                }
                guard s.late > 0 else { return (next, false, false, s.expiresIn) }
                s.late -= 1
                return (next, true, false, s.expiresIn)
            }
            guard let issued = outcome.issued else { return Self.json(400, #"{"error":"invalid_grant"}"#) }
            let stall = state.withLock { s in
                defer { s.stall = 0 }
                return s.stall
            }
            if stall > 0 { try? await Task.sleep(for: .seconds(stall)) }
            if outcome.late {
                clock.advance(waited)
                throw .unreachable("cannot reach idp.example: no answer within \(Int(waited)) s")
            }
            if outcome.slow { clock.advance(waited) }
            return Self.json(200, #"{"access_token":"access-\#(issued)","token_type":"Bearer","expires_in":\#(outcome.expiresIn),"refresh_token":"\#(issued)"}"#)
        default:
            return HTTPResponse(status: 404)
        }
    }

    private static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }
}

/// Issue 24, item 6: a refresh that times out while the provider completes it.
final class LateRefreshTests: XCTestCase {
    func testAnAnswerSoLateItsTokenIsSpentIsFollowedByOneMoreRefresh() async throws {
        var stub: LateRotatingProvider?
        let h = try await BrokerHarness(refreshMargin: 0) { clock in
            let made = LateRotatingProvider(clock: clock, grace: 0, waited: 12)
            stub = made
            return made
        }
        let provider = try XCTUnwrap(stub)
        // A stalled provider answers 12 s after the request with a token for 10 s: counted
        // from the send, it is spent. The caller gets a token from one more refresh instead
        // of an error.
        provider.answerSlowly(1, expiresIn: 10)
        let served = try await h.token()
        XCTAssertEqual(provider.refreshes, ["refresh-0", "refresh-1"])
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-refresh-2"))
        XCTAssertGreaterThan(Double(served.expiresAt) - h.clock.now, 8)
    }

    func testARefreshWaitsRefreshTimeoutOtherCallsTheHTTPTimeout() async throws {
        var stub: LateRotatingProvider?
        let h = try await BrokerHarness(daemonKeys: "http_timeout = 5\nrefresh_timeout = 40") { clock in
            let made = LateRotatingProvider(clock: clock, grace: 0, waited: 40)
            stub = made
            return made
        }
        _ = try await h.token()
        XCTAssertEqual(try XCTUnwrap(stub).deadlines, ["/.well-known/openid-configuration -", "/token 40 120"],
                       "the answer to a written refresh is read for lateAnswerWindow")
    }

    func testACallerStopsWaitingAtRefreshTimeoutAndTheLateAnswerIsKeptForTheNext() async throws {
        var stub: LateRotatingProvider?
        let h = try await BrokerHarness(daemonKeys: "refresh_timeout = 1") { clock in
            let made = LateRotatingProvider(clock: clock, grace: 0, waited: 0)
            stub = made
            return made
        }
        let provider = try XCTUnwrap(stub)
        // The provider takes the refresh (refresh-0 is spent) and answers 2 s later, in
        // real time; the caller waits refresh_timeout (1 s) and a moment.
        provider.stallNext(2)
        let error = await h.tokenError()
        guard case .providerUnreachable(_, _, let message) = error else {
            return XCTFail("expected -32004 at the caller's deadline, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("no answer within 1 s") && message.contains("still awaits its answer"), message)
        // The next caller, while the answer is awaited, does not send the spent refresh
        // token: it waits (its own 1.25 s) for the answer and is served what it brought.
        let served = try await h.token()
        XCTAssertEqual(provider.refreshes, ["refresh-0"], "one refresh: the spent refresh token is never sent again")
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-refresh-1"))
        let stored = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(stored, fingerprint(provider.current), "the rotated refresh token is stored: the sign-in lives on")
    }

    func testRefreshTimeoutIsFifteenSecondsUnlessSet() throws {
        let provider = "[providers.a]\nissuer = \"https://a.example\"\nclient_id = \"x\"\n"
        let plain = try ConfigLoader.parse(provider, file: "c.toml")
        XCTAssertEqual(plain.daemon.refreshTimeout, 12, "shorter than authctl's 15 s call deadline")
        XCTAssertEqual(plain.providers[0].refreshTokenReuseGrace, 0, "no retry unless the provider is known to allow it")
        XCTAssertThrowsError(try ConfigLoader.parse("[daemon]\nrefresh_timeout = 0\n" + provider, file: "c.toml"))
        XCTAssertEqual(try ConfigLoader.parse(provider + "refresh_token_reuse_grace = 30", file: "c.toml").providers[0].refreshTokenReuseGrace, 30)
    }

    func testARefreshTakenButAnsweredLateIsRetriedOnceWithTheSameTokenWithinTheGrace() async throws {
        var stub: LateRotatingProvider?
        let h = try await BrokerHarness(providerKeys: "refresh_token_reuse_grace = 60", daemonKeys: "refresh_timeout = 30") { clock in
            let made = LateRotatingProvider(clock: clock, grace: 60, waited: 30)
            stub = made
            return made
        }
        let provider = try XCTUnwrap(stub)
        provider.answerLate(1)
        let served = try await h.token()
        XCTAssertEqual(provider.refreshes, ["refresh-0", "refresh-0"], "one retry, with the same refresh token")
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-refresh-2"))
        let stored = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(stored, fingerprint(provider.current), "the newest refresh token is stored: the sign-in lives on")
    }

    func testNoRetryOnceTheGraceIsOverNorWithoutAGrace() async throws {
        for keys in ["refresh_token_reuse_grace = 20", ""] {
            var stub: LateRotatingProvider?
            let h = try await BrokerHarness(providerKeys: keys, daemonKeys: "refresh_timeout = 30") { clock in
                let made = LateRotatingProvider(clock: clock, grace: 20, waited: 30)
                stub = made
                return made
            }
            let provider = try XCTUnwrap(stub)
            provider.answerLate(1)
            let error = await h.tokenError()
            guard case .providerUnreachable = error else { return XCTFail("expected unreachable, got \(String(describing: error))") }
            XCTAssertEqual(provider.refreshes, ["refresh-0"], "\(keys): a retry after the grace would only be refused")
        }
    }
}
