@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// Answers that come later (a refresh in flight) on connections the front door keeps: what
/// a caller notices, over a real Unix socket, with the rig's "later" answers held back as a
/// refresh would hold them (`FrontDoorRig.work`).
final class FrontDoorWorkTests: XCTestCase {
    func testAnAnswerThatComesLaterIsWrittenOnTheSameConnectionWhichStaysOpen() throws {
        let rig = try FrontDoorRig(held: true)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 3, resource: "later"))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        rig.work.release()
        let answer = client.readLines(1).first ?? ""
        XCTAssertTrue(answer.contains(#""id":3"#) && answer.contains(#""access_token":"later-"#), answer)
        client.send(FrontDoorRig.request(id: 4))
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":4"#) }, true, "the connection goes on")
        XCTAssertTrue(rig.handovers.withLock { $0.isEmpty }, "nothing for NIO")
        XCTAssertEqual(rig.activity.openConnections, 1)
        XCTAssertTrue(waitUntil { rig.activity.requestsInFlight == 0 })
    }

    func testEveryCallerOfABurstIsAnsweredOnItsOwnConnection() throws {
        let rig = try FrontDoorRig(held: true)
        let clients = try (0..<60).map { _ in try rig.connect() }
        for (i, client) in clients.enumerated() { client.send(FrontDoorRig.request(id: i, resource: "later")) }
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == clients.count })
        XCTAssertEqual(rig.activity.requestsInFlight, clients.count)
        rig.work.release()
        for (i, client) in clients.enumerated() {
            XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":\#(i),"#) }, true, "caller \(i)")
        }
        XCTAssertTrue(rig.handovers.withLock { $0.isEmpty })
    }

    func testACallerThatClosesItsWritingSideWhileItsAnswerIsWorkedOnStillGetsIt() throws {
        let rig = try FrontDoorRig(held: true)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 5, resource: "later"))
        shutdown(client.fileDescriptor, CInt(SHUT_WR))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        usleep(100_000)  // the door has seen the end of input by now
        rig.work.release()
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":5"#) }, true)
        XCTAssertTrue(client.closedByPeer(), "answered, then the end")
        XCTAssertTrue(waitUntil { rig.activity.openConnections == 0 })
    }

    func testARequestSentWhileAnAnswerIsWorkedOnIsAnsweredAfterIt() throws {
        let rig = try FrontDoorRig(held: true)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1, resource: "later"))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        client.send(FrontDoorRig.request(id: 2))
        usleep(100_000)
        rig.work.release()
        let lines = client.readLines(2)
        XCTAssertEqual(lines.count, 2)
        XCTAssertEqual(lines.first.map { $0.contains(#""id":1"#) }, true, "answers in the order asked")
        XCTAssertEqual(lines.last.map { $0.contains(#""id":2"#) }, true)
        XCTAssertTrue(rig.handovers.withLock { $0.isEmpty })
    }

    func testAConnectionWaitingForItsAnswerIsNotClosedAsIdle() throws {
        let rig = try FrontDoorRig(idle: 0.2, held: true)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 6, resource: "later"))
        usleep(1_500_000)  // past the idle timeout and a sweep (once a second)
        rig.work.release()
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":6"#) }, true)
        XCTAssertTrue(client.closedByPeer(), "idle once answered")
    }

    func testACallerThatHangsUpBeforeItsAnswerIsClosedAndForgotten() throws {
        let rig = try FrontDoorRig(held: true)
        var client: FileHandle? = try rig.connect()
        client?.send(FrontDoorRig.request(id: 8, resource: "later"))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        client = nil
        usleep(100_000)
        rig.work.release()
        XCTAssertTrue(waitUntil { rig.activity.openConnections == 0 && rig.activity.requestsInFlight == 0 })
        // Its descriptor is free again, and a new caller is served as before.
        let next = try rig.connect()
        next.send(FrontDoorRig.request(id: 9))
        XCTAssertEqual(next.readLines(1).first.map { $0.contains(#""id":9"#) }, true)
    }

    func testWorkPastMaxRequestsInFlightIsRefusedAsOverloaded() throws {
        let rig = try FrontDoorRig(held: true, maxRequestsInFlight: 1)
        let first = try rig.connect(), second = try rig.connect()
        first.send(FrontDoorRig.request(id: 1, resource: "later"))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        second.send(FrontDoorRig.request(id: 2, resource: "later"))
        let refused = second.readLines(1).first ?? ""
        XCTAssertTrue(refused.contains(#""code":-32009"#) && refused.contains("working on 1 requests"), refused)
        rig.work.release()
        XCTAssertEqual(first.readLines(1).first.map { $0.contains(#""access_token""#) }, true)
    }

    func testStoppingWaitsForTheAnswersBeingWorkedOn() throws {
        let rig = try FrontDoorRig(held: true)
        let waiting = try rig.connect(), idle = try rig.connect()
        idle.send(FrontDoorRig.request(id: 1))
        XCTAssertEqual(idle.readLines(1).count, 1)
        waiting.send(FrontDoorRig.request(id: 2, resource: "later"))
        XCTAssertTrue(waitUntil { rig.work.started.load(ordering: .relaxed) == 1 })
        let work = rig.work
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { work.release() }
        rig.door.stop()
        XCTAssertEqual(waiting.readLines(1).first.map { $0.contains(#""id":2"#) }, true, "answered before the door ended")
        XCTAssertTrue(idle.closedByPeer())
    }
}
