import BrokerCore
@testable import BrokerServer
import NIOCore
import NIOEmbedded
import XCTest

/// The stall limit (`request_line_timeout`, 5 s in the harness) under back-pressure: it
/// measures how long the client takes to finish the line it started, never the time the
/// daemon itself left the rest of a line unread.
final class BackPressureTests: XCTestCase {
    func testTheStallLimitRunsFromTheLineNotYetFinished() throws {
        let channel = try EmbeddedChannel.daemon()
        let first = Handlers.request(id: 1, resource: "now")
        let second = Handlers.request(id: 2, resource: "now")
        let cut = first.index(first.startIndex, offsetBy: 20)
        try channel.send(String(first[..<cut]))
        channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        // The first line finishes and a second one starts in the same read.
        try channel.send(String(first[cut...]) + "\n" + String(second.prefix(20)))
        XCTAssertEqual(try channel.answers().map(\.id), [1])
        channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        XCTAssertTrue(channel.isActive, "6 s after the first line began, 3 s after the second did")
        channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        let answers = try channel.answers()
        XCTAssertEqual(answers.map(\.errorCode), [-32600])
        XCTAssertEqual(answers.first?.errorMessage, "the request line was not finished within 5 s; the connection is closed")
        XCTAssertFalse(channel.isActive)
    }

    func testALineLeftUnreadWhileTheDaemonHoldsReadsIsNotAStall() throws {
        let channel = try EmbeddedChannel.daemon()
        // 64 requests the (never opened) gate keeps in flight: the connection's cap. Their
        // tasks stay suspended; they never touch the embedded loop.
        let inFlight = (0..<DaemonSettings.maxRequestsInFlightPerConnection).map { Handlers.request(id: $0, resource: "g\($0)") }
        try channel.send(inFlight.joined(separator: "\n") + "\n" + Handlers.request(id: 99, resource: "now").prefix(20))
        channel.embeddedEventLoop.advanceTime(by: .seconds(12))
        XCTAssertEqual(try channel.answers().count, 0)
        XCTAssertTrue(channel.isActive, "the daemon, not the client, left the line unfinished")
    }
}
