@testable import BrokerServer
import BrokerCore
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOEmbedded
import XCTest

/// The daemon's connection pipeline (limits, line framing, the JSON-RPC handler) on NIO's
/// embedded channels: what a client sees for the bytes it sends.
final class RPCHandlerTests: XCTestCase {
    // MARK: Framing

    func testALineSplitAcrossReadsIsOneRequest() throws {
        let channel = try EmbeddedChannel.daemon()
        let line = Handlers.request(id: 1, resource: "now")
        let middle = line.index(line.startIndex, offsetBy: 20)
        try channel.send(String(line[..<middle]))
        XCTAssertEqual(try channel.answers().count, 0, "half a line is not a request")
        try channel.send(String(line[middle...]) + "\r\n")
        let answers = try channel.answers()
        XCTAssertEqual(answers.map(\.id), [1])
        XCTAssertEqual(answers.first?.resource, "now")
    }

    /// A line in several reads is put together in a buffer of the framing's own, and each
    /// piece is wiped where it was read: it may be part of a login.answer's value, a password
    /// (docs/security.md), which handling the line wipes only in the line itself.
    func testThePiecesOfALineInSeveralReadsAreWipedWhereTheyWereRead() throws {
        let channel = try EmbeddedChannel.daemon()
        let line = Handlers.request(id: 1, resource: "now")
        let middle = line.index(line.startIndex, offsetBy: 20)
        let first = channel.allocator.buffer(string: String(line[..<middle]))
        let last = channel.allocator.buffer(string: String(line[middle...]) + "\n")
        try channel.writeInbound(first)
        try channel.writeInbound(last)
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        XCTAssertEqual(Set(first.readableBytesView), [0])
        XCTAssertEqual(Set(last.readableBytesView), [0])
    }

    func testTwoLinesInOneReadAreTwoRequests() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: 1, resource: "now") + "\n" + Handlers.request(id: 2, resource: "now") + "\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1, 2])
        XCTAssertTrue(channel.isActive)
    }

    func testALineAtTheCapIsServedOneByteMoreIsAnsweredAndClosed() throws {
        let cap = BrokerServer.maxLineLength
        XCTAssertEqual(cap, 65_536, "docs/protocol.md")
        let channel = try EmbeddedChannel.daemon()
        let request = Handlers.request(id: 1, resource: "now")
        try channel.send(request + String(repeating: " ", count: cap - request.utf8.count) + "\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1])

        // Sent in pieces, as a client would: refused as soon as the cap is passed, before
        // any newline arrives.
        try channel.send(String(repeating: " ", count: cap))
        XCTAssertEqual(try channel.answers().count, 0)
        try channel.send(" ")
        let answers = try channel.answers()
        XCTAssertEqual(answers.map(\.errorCode), [-32008])
        XCTAssertEqual(answers.first?.errorMessage, "the request line is longer than 65536 bytes; the connection is closed")
        XCTAssertEqual(answers.first?.object["id"] as? NSNull, NSNull())
        XCTAssertFalse(channel.isActive, "the connection is closed after the answer")
    }

    /// docs/protocol.md: a `\r` before the `\n` is ignored, so it does not count toward the cap
    /// either, also when it ends a read and the `\n` comes in the next.
    func testALineAtTheCapEndingInCarriageReturnNewlineIsServed() throws {
        let cap = BrokerServer.maxLineLength
        let request = Handlers.request(id: 1, resource: "now")
        let line = request + String(repeating: " ", count: cap - request.utf8.count)
        let channel = try EmbeddedChannel.daemon()
        try channel.send(line + "\r\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        try channel.send(line + "\r")
        XCTAssertEqual(try channel.answers().count, 0)
        try channel.send("\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        XCTAssertTrue(channel.isActive)
    }

    func testBlankLinesAreToleratedAndBadLinesAnsweredWithoutClosing() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send("\n  \n{not json}\n[]\n" + Handlers.request(id: 7, resource: "now") + "\n")
        let answers = try channel.answers()
        XCTAssertEqual(answers.map(\.errorCode), [-32700, -32600, nil])
        XCTAssertEqual(answers.last?.id, 7)
        XCTAssertTrue(channel.isActive)
    }

    // MARK: Who may connect, and how many

    func testCallersOfAnotherUserOrUnidentifiedAreRefused() throws {
        let other: PeerIdentifier = { _ in PeerCredentials.UCred(pid: 4242, uid: getuid() + 1, gid: 0) }
        for (identify, uid) in [(other, "\(getuid() + 1)"), ({ _ in nil }, "unknown")] as [(PeerIdentifier, String)] {
            let activity = ServerActivity()
            let channel = try EmbeddedChannel.daemon(identify: identify, activity: activity)
            let refusal = try channel.answers()
            XCTAssertEqual(refusal.map(\.errorCode), [-32002])
            XCTAssertEqual(refusal.first?.errorMessage,
                           "connections from uid \(uid) are refused: authbrokerd serves only its own user (uid \(getuid()))")
            // Closed at once, and not counted toward max_connections.
            XCTAssertFalse(channel.isActive)
            XCTAssertEqual(activity.openConnections, 0)
        }
    }

    func testConnectionsOverTheCapAreRefused() throws {
        let activity = ServerActivity()
        let first = try EmbeddedChannel.daemon(activity: activity, maxConnections: 1)
        XCTAssertEqual(try first.answers().count, 0)
        let second = try EmbeddedChannel.daemon(activity: activity, maxConnections: 1)
        let refusal = try second.answers()
        XCTAssertEqual(refusal.map(\.errorCode), [-32009])
        XCTAssertEqual(refusal.first?.errorMessage, "authbrokerd has 1 connections open already; close some and try again")
        // The first connection is served as before.
        try first.send(Handlers.request(id: 1, resource: "now") + "\n")
        XCTAssertEqual(try first.answers().map(\.id), [1])
    }

    // MARK: Notifications

    func testARequestWithoutIDIsCarriedOutButNotAnswered() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: nil, resource: "now") + "\n" + Handlers.request(id: 2, resource: "now") + "\n")
        XCTAssertEqual(try channel.answers().map(\.id), [2], "only the request with an id is answered")
    }

    // MARK: Answers out of order (async answers need a thread-safe loop)

    func testAsyncAnswersGoOutWhenReadyEachWithItsID() async throws {
        let gate = Gate()
        let channel = NIOAsyncTestingChannel()
        try await channel.testingEventLoop.executeInContext {
            try Handlers.install(on: channel.pipeline.syncOperations, gate: gate)
        }
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket"))
        func send(_ text: String) async throws {
            var buffer = channel.allocator.buffer(capacity: text.utf8.count)
            buffer.writeString(text)
            try await channel.writeInbound(buffer)
        }
        func next() async throws -> Answer { try Answer(try await channel.waitForOutboundWrite(as: ByteBuffer.self)) }

        try await send(Handlers.request(id: 1, resource: "a") + "\n" + Handlers.request(id: 2, resource: "b") + "\n")
        // A notification whose work is slow is still done, and still not answered.
        try await send(Handlers.request(id: nil, resource: "c") + "\n")
        try await send(Handlers.request(id: 3, resource: "now") + "\n")
        let third = try await next()
        XCTAssertEqual([third.id, 3], [3, 3])

        await gate.open("b")
        let second = try await next()
        XCTAssertEqual(second.id, 2)
        XCTAssertEqual(second.resource, "b")

        await gate.open("c")
        await gate.open("a")
        let first = try await next()
        XCTAssertEqual(first.id, 1)
        XCTAssertEqual(first.resource, "a")
        let arrived = await gate.arrived
        XCTAssertEqual(Set(arrived), ["a", "b", "c"])
        // Nothing else was written: the notification had no answer.
        try await channel.testingEventLoop.executeInContext {}
        let extra = try await channel.readOutbound(as: ByteBuffer.self)
        XCTAssertNil(extra)
        _ = try await channel.finish(acceptAlreadyClosed: true)
    }
}

/// `cache_misses_per_minute` as a connection counts it (issue 21 item 3).
final class MissBudgetTests: XCTestCase {
    func testABurstOfTheLimitThenOneAsTheMinuteRefills() {
        var budget = MissBudget()
        let start: UInt64 = 5_000_000_000
        for _ in 0..<6 { XCTAssertNil(budget.take(perMinute: 6, now: start)) }
        XCTAssertEqual(budget.take(perMinute: 6, now: start), 10, "one comes back every 10 s")
        XCTAssertEqual(budget.take(perMinute: 6, now: start + 4_000_000_000), 6)
        XCTAssertNil(budget.take(perMinute: 6, now: start + 10_000_000_000))
        XCTAssertNotNil(budget.take(perMinute: 6, now: start + 10_000_000_000))
        XCTAssertNil(budget.take(perMinute: 6, now: start + 3_600_000_000_000), "an idle hour refills it")
        for _ in 0..<1000 { XCTAssertNil(budget.take(perMinute: 0, now: start), "0: no limit") }
    }
}
