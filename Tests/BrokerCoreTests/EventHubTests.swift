@testable import BrokerCore
import BrokerProtocol
import Foundation
import Synchronization
import XCTest

/// The broker's events (`events.subscribe`): what a subscriber is told, at the broker over
/// the STUB provider and the moved clock.
final class EventHubTests: XCTestCase {
    /// Collects what a subscriber is handed.
    final class Inbox: Sendable {
        private let received = Mutex<[BrokerEvent]>([])
        var events: [BrokerEvent] { received.withLock { $0 } }
        var kinds: [EventKind] { events.map(\.kind) }
        func take(_ event: BrokerEvent) { received.withLock { $0.append(event) } }
    }

    func testARefreshIsReportedWithItsKeyAndExpiryAndNeverTheToken() async throws {
        let h = try await BrokerHarness(providerKeys: #"scope_sets = [["read"]]"#)
        let inbox = Inbox()
        _ = h.broker.events.hub.subscribe { inbox.take($0) }
        let token = try await h.token(TokenGetParams(resource: "https://api", scopes: ["read"]))

        XCTAssertEqual(inbox.events, [BrokerEvent(
            kind: .tokenRefreshed, provider: "corp", account: "alice", subject: "sub-alice",
            resource: "https://api", scopes: ["read"], expiresAt: token.expiresAt)])
        let wire = String(decoding: try JSONEncoder().encode(EventNotification(inbox.events[0])), as: UTF8.self)
        XCTAssertFalse(wire.contains(token.accessToken), "an event carries no token")
        XCTAssertFalse(wire.contains("refresh-"), "an event carries no refresh token")

        // A cache hit refreshes nothing, so it reports nothing.
        _ = try await h.token(TokenGetParams(resource: "https://api", scopes: ["read"]))
        XCTAssertEqual(inbox.events.count, 1)
    }

    func testTheProviderGoingDownAndComingBackIsReportedOnceEach() async throws {
        let h = try await BrokerHarness()
        let inbox = Inbox()
        _ = h.broker.events.hub.subscribe(kinds: [.providerUnreachable, .providerBack]) { inbox.take($0) }
        h.transport.down = true
        _ = await h.tokenError()
        h.clock.advance(2)
        _ = await h.tokenError()
        XCTAssertEqual(inbox.kinds, [.providerUnreachable], "a longer back-off is not a new outage")
        h.transport.down = false
        h.clock.advance(10)
        _ = try await h.token()
        XCTAssertEqual(inbox.kinds, [.providerUnreachable, .providerBack])
    }

    func testARefusedRefreshTokenReportsLoginRequired() async throws {
        let h = try await BrokerHarness()
        let inbox = Inbox()
        _ = h.broker.events.hub.subscribe(providers: ["corp"]) { inbox.take($0) }
        h.transport.script(.error("invalid_grant"))
        _ = await h.tokenError()
        XCTAssertEqual(inbox.events, [BrokerEvent(kind: .loginRequired, provider: "corp", account: "alice", subject: "sub-alice")])
    }

    func testSignOutIsReportedAndFiltersAndUnsubscribeAreKept() async throws {
        let h = try await BrokerHarness()
        let signedOut = Inbox(), otherProvider = Inbox(), gone = Inbox()
        _ = h.broker.events.hub.subscribe(kinds: [.signedOut]) { signedOut.take($0) }
        _ = h.broker.events.hub.subscribe(providers: ["elsewhere"]) { otherProvider.take($0) }
        let id = h.broker.events.hub.subscribe { gone.take($0) }
        h.broker.events.hub.unsubscribe(id)
        XCTAssertEqual(h.broker.events.hub.subscriberCount, 2)

        _ = try await h.token()
        _ = try await h.broker.signOut.logout(LogoutParams(local: true))
        XCTAssertEqual(signedOut.events, [BrokerEvent(kind: .signedOut, provider: "corp", account: "alice", subject: "sub-alice")])
        XCTAssertEqual(otherProvider.events, [])
        XCTAssertEqual(gone.events, [])
    }
}
