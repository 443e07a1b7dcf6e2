@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Logging
import Foundation
import NIOCore
import NIOEmbedded
import XCTest

/// `events.subscribe` on the daemon's pipeline (NIO's embedded channel): events reach the
/// connection as notifications, a subscriber that cannot be written to is dropped, and a
/// closed connection leaves no subscriber behind.
final class EventSubscriptionTests: XCTestCase {
    private func channel(_ hub: EventHub, table: MethodTable = table) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try BrokerServer.addHandlers(
            to: channel.pipeline.syncOperations, table: table, limits: Handlers.limits(),
            server: Handlers.server(events: hub), identify: Handlers.me)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket")).wait()
        return channel
    }

    /// The events service's methods, as the daemon's table has them.
    private static let table: MethodTable = {
        var table = MethodTable()
        EventsService().register(into: &table)
        return table
    }()

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

    /// Served through the method table as every method is (its params read, the caller
    /// policy asked), the connection carrying out what the table answers: a table without
    /// the events service's methods has no events.subscribe.
    func testASubscriptionIsServedThroughTheMethodTable() throws {
        let hub = EventHub()
        let c = try channel(hub, table: MethodTable())
        try c.send(#"{"jsonrpc":"2.0","id":1,"method":"events.subscribe"}"# + "\n")
        XCTAssertEqual(try c.answers().map(\.errorCode), [-32601])
        XCTAssertEqual(hub.subscriberCount, 0)
    }

    /// A request that fails changes nothing: the subscription the connection had goes on.
    func testARefusedSubscribeKeepsTheSubscriptionItHad() throws {
        let hub = EventHub()
        let c = try channel(hub)
        try c.send(#"{"jsonrpc":"2.0","id":1,"method":"events.subscribe"}"# + "\n")
        try c.send(#"{"jsonrpc":"2.0","id":2,"method":"events.subscribe","params":{"providers":"corp"}}"# + "\n")
        XCTAssertEqual(try c.answers().map(\.errorCode), [nil, -32602])
        XCTAssertEqual(hub.subscriberCount, 1)
        hub.emit(Self.refreshed)
        c.embeddedEventLoop.run()
        XCTAssertEqual(try c.answers().count, 1, "still subscribed")
    }

    /// The front door never keeps a subscriber: it hands the connection to NIO with the
    /// request taken in (the table's answer, which the pipeline carries out), not re-read.
    func testAtTheFrontDoorASubscriberGoesToNIOAsTakenIn() throws {
        let rig = try FrontDoorRig(table: Self.table)
        let client = try rig.connect()
        client.send(Data(#"{"jsonrpc":"2.0","id":5,"method":"events.subscribe","params":{"kinds":["signed_out"]}}"#.utf8 + [0x0A]))
        XCTAssertTrue(client.closedByPeer(), "handed over (the rig closes what it is handed)")
        let handover = try XCTUnwrap(rig.handovers.withLock { $0.first })
        XCTAssertNil(handover.unread)
        XCTAssertEqual(handover.adopted?.id, .number(5))
        guard case .subscription(let change, _)? = handover.adopted?.reply else { return XCTFail("not a subscription") }
        XCTAssertEqual(change, .subscribe(providers: nil, kinds: [.signedOut]))
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
