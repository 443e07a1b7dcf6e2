@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// `events.subscribe` on the daemon's pipeline (NIO's embedded channel): events reach the
/// connection as notifications, a subscriber that cannot be written to is dropped, and a
/// closed connection leaves no subscriber behind.
final class EventSubscriptionTests: XCTestCase {
    private func channel(_ hub: EventHub) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try BrokerServer.addHandlers(
            to: channel.pipeline.syncOperations, table: MethodTable(), limits: Handlers.limits(),
            server: Handlers.server(events: hub), identify: Handlers.me)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket")).wait()
        return channel
    }

    private static let refreshed = BrokerEvent(kind: .tokenRefreshed, provider: "corp", account: "alice", subject: "s",
                                               scopes: [], expiresAt: 1_800_000_000)

    func testASubscriberGetsNotificationsUntilItUnsubscribesOrCloses() throws {
        let hub = EventHub()
        let c = try channel(hub)
        try c.send(#"{"jsonrpc":"2.0","id":1,"method":"events.subscribe","params":{"kinds":["nope"]}}"# + "\n")
        XCTAssertEqual(try c.answers().map(\.errorCode), [-32602])
        try c.send(#"{"jsonrpc":"2.0","id":2,"method":"events.subscribe","params":{"kinds":["token_refreshed"]}}"# + "\n")
        XCTAssertEqual(try c.answers().map(\.id), [2])
        XCTAssertEqual(hub.subscriberCount, 1)

        hub.emit(Self.refreshed)
        hub.emit(BrokerEvent(kind: .signedOut, provider: "corp"))  // filtered out
        c.embeddedEventLoop.run()
        let events = try c.answers()
        XCTAssertEqual(events.count, 1)
        XCTAssertNil(events[0].id)
        XCTAssertEqual(events[0].object["method"] as? String, "event")
        XCTAssertEqual((events[0].object["params"] as? [String: Any])?["kind"] as? String, "token_refreshed")

        try c.send(#"{"jsonrpc":"2.0","id":3,"method":"events.unsubscribe"}"# + "\n")
        XCTAssertEqual(try c.answers().map(\.id), [3])
        XCTAssertEqual(hub.subscriberCount, 0)
        try c.send(#"{"jsonrpc":"2.0","id":4,"method":"events.subscribe"}"# + "\n")
        XCTAssertEqual(hub.subscriberCount, 1)
        _ = try c.close().wait()
        XCTAssertEqual(hub.subscriberCount, 0, "a closed connection is unsubscribed")
    }

    func testASubscriberThatCannotBeWrittenToIsDropped() throws {
        let hub = EventHub()
        let c = try channel(hub)
        try c.send(#"{"jsonrpc":"2.0","id":1,"method":"events.subscribe"}"# + "\n")
        _ = try c.answers()
        c.isWritable = false  // its unwritten bytes passed the high-water mark
        hub.emit(Self.refreshed)
        c.embeddedEventLoop.run()
        XCTAssertFalse(c.isActive, "the connection is closed")
        XCTAssertEqual(hub.subscriberCount, 0)
    }
}
