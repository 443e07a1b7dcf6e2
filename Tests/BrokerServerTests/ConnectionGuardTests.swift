import BrokerCore
import Foundation
@testable import BrokerServer
import NIOCore
import NIOEmbedded
import XCTest

/// The lifecycle as NIO's pipeline holds it (`ConnectionGuard`), on an embedded channel
/// whose clock the test moves (idle 60 s, stall 5 s in the harness).
final class ConnectionGuardTests: XCTestCase {
    func testAnIdleConnectionIsClosedAfterItsLastRequest() throws {
        let channel = try EmbeddedChannel.daemon()
        channel.embeddedEventLoop.advanceTime(by: .seconds(50))
        try channel.send(Handlers.request(id: 1, resource: "now") + "\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        channel.embeddedEventLoop.advanceTime(by: .seconds(50))
        XCTAssertTrue(channel.isActive, "idle for 50 s since its request")
        channel.embeddedEventLoop.advanceTime(by: .seconds(11))
        XCTAssertFalse(channel.isActive)
    }

    /// The guard writes its answer with the connection's codec: the same answer, one line,
    /// as it wrote with an encoder of its own before. (JSONEncoder's order of members
    /// changes from one process to the next, so the JSON value is compared, not the order.)
    func testALineNotFinishedInTimeIsAnsweredAsBefore() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(#"{"jsonrpc":"2.0","id":1,"#)
        channel.embeddedEventLoop.advanceTime(by: .seconds(6))
        let answers = try channel.answers()
        XCTAssertEqual(answers.count, 1)
        XCTAssertEqual(answers.first?.object as NSDictionary?, try JSONSerialization.jsonObject(with: Data(
            #"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"the request line was not finished within 5 s; the connection is closed"}}"#.utf8)) as? NSDictionary)
        XCTAssertFalse(channel.isActive)
    }

    func testAConnectionWaitingForAnAnswerIsNeverIdle() throws {
        // The (never opened) gate keeps the answer in the works; its task stays suspended
        // and never touches the embedded loop.
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: 1, resource: "slow") + "\n")
        channel.embeddedEventLoop.advanceTime(by: .seconds(600))
        XCTAssertTrue(channel.isActive, "a sign-in may wait for the user for minutes")
        XCTAssertEqual(try channel.answers().count, 0)
    }
    /// The last line of a peer that closed its writing side is taken without its newline,
    /// so it is no longer an unfinished line that stalls: a slow answer to it is not cut
    /// off with "not finished".
    func testAHalfClosedPeersLastLineIsNotTakenForAStall() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: 1, resource: "slow"))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        channel.embeddedEventLoop.advanceTime(by: .seconds(6))
        XCTAssertTrue(channel.isActive, "its answer is being worked on")
        XCTAssertEqual(try channel.answers().count, 0)
    }

    /// The close once the peer is done waits for the answers it has not taken yet (the
    /// channel past its high-water mark), as on the front door's connections.
    func testAHalfClosedPeerIsClosedOnceItHasTakenItsAnswers() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: 1, resource: "now") + "\n")
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        XCTAssertTrue(channel.isActive, "its answers are not out yet")
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        XCTAssertFalse(channel.isActive, "its answers are out and it sends nothing more")
    }

    func testAHalfClosedPeerOwedNothingIsClosedAtOnce() throws {
        let channel = try EmbeddedChannel.daemon()
        try channel.send(Handlers.request(id: 1, resource: "now"))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        XCTAssertEqual(try channel.answers().map(\.id), [1], "its last line, without a newline, is answered")
        XCTAssertFalse(channel.isActive)
    }
}
