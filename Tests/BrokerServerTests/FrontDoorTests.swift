@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// The front door, the fast path of the connection lifecycle, driven over a real Unix socket
/// on its own thread: what a caller notices of each of the lifecycle's states.
final class FrontDoorTests: XCTestCase {
    func testAnswersAtOnceAndKeepsTheConnectionForTheNextRequest() throws {
        let rig = try FrontDoorRig()
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":1"#) }, true)
        client.send(FrontDoorRig.request(id: 2))
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":2"#) }, true)
        XCTAssertTrue(rig.handovers.withLock { $0.isEmpty }, "answered at once: nothing for NIO")
        XCTAssertEqual(rig.activity.openConnections, 1)
    }

    func testACallerThatClosesItsWritingSideGetsItsAnswerAndThenTheEnd() throws {
        let rig = try FrontDoorRig()
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 7))
        shutdown(client.fileDescriptor, CInt(SHUT_WR))
        XCTAssertEqual(client.readLines(1).count, 1)
        XCTAssertTrue(client.closedByPeer(), "half-closed and answered: the door closes")
    }

    func testASignInsWaitGoesToNIOAsTakenIn() throws {
        // Work cancelled when its caller hangs up (`Reply.untilClosed`) is NIO's to watch.
        let rig = try FrontDoorRig()
        let client = try rig.connect()
        client.send(Data(#"{"jsonrpc":"2.0","id":3,"method":"login.wait","params":{"resource":"x"}}"#.utf8 + [0x0A]))
        XCTAssertTrue(client.closedByPeer(), "handed over (the rig closes what it is handed)")
        let handovers = rig.handovers.withLock { $0 }
        XCTAssertEqual(handovers.count, 1)
        XCTAssertEqual(handovers.first?.adopted?.id, .number(3))
        XCTAssertEqual(handovers.first?.acceptedWithoutRules, true)
        XCTAssertEqual(rig.activity.openConnections, 0, "NIO counts it from here")
    }

    func testALineInPiecesGoesToNIOWithWhatWasRead() throws {
        let rig = try FrontDoorRig()
        let client = try rig.connect()
        client.send(Data(#"{"jsonrpc":"2.0","id":1,"#.utf8))
        XCTAssertTrue(client.closedByPeer())
        let unread = rig.handovers.withLock { $0.first?.unread }
        XCTAssertEqual(unread.map { String(buffer: $0) }, #"{"jsonrpc":"2.0","id":1,"#)
    }

    func testAnIdleConnectionIsClosed() throws {
        let rig = try FrontDoorRig(idle: 0.2)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        XCTAssertEqual(client.readLines(1).count, 1)
        XCTAssertTrue(client.closedByPeer(), "idle past connection_idle_timeout")
        XCTAssertTrue(waitUntil { rig.activity.openConnections == 0 })
    }

    func testARequestSentWhileAnAnswerWaitsIsAnsweredOnceTheAnswerIsTaken() throws {
        // An answer far larger than the socket's buffer: the door waits to write it, and
        // reads nothing more until it is out (back-pressure).
        let rig = try FrontDoorRig(answering: 4 << 20)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        // The first bytes of the answer: the door took the request, and the rest of the
        // answer waits for the socket. (Both lines in one read would go to NIO.)
        var first = [UInt8](repeating: 0, count: 1024)
        XCTAssertEqual(Glibc.read(client.fileDescriptor, &first, first.count), first.count)
        client.send(FrontDoorRig.request(id: 2))
        var lines = client.readLines(2)
        lines[0] = String(decoding: first, as: UTF8.self) + lines[0]
        XCTAssertEqual(lines.count, 2)
        XCTAssertEqual(lines.map { $0.contains(#""id":1"#) }, [true, false])
        XCTAssertEqual(lines.last.map { $0.contains(#""id":2"#) }, true)
    }

    func testACallerThatReadsNoneOfItsAnswerIsClosedAfterTheStallTimeout() throws {
        let size = 4 << 20
        let rig = try FrontDoorRig(answering: size, stall: 0.3)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        // The caller reads nothing while the door's sweep (once a second) finds it stalled.
        XCTAssertTrue(waitUntil { rig.activity.openConnections == 1 }, "accepted")
        XCTAssertTrue(waitUntil { rig.activity.openConnections == 0 }, "a caller that does not read is cut off")
        let got = client.readLines(1)
        XCTAssertLessThan(got.first?.utf8.count ?? 0, size, "the answer was cut off")
    }
}
