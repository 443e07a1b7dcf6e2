@testable import BrokerCore
@testable import BrokerServer
import Foundation
import XCTest

/// The caller policy is decided in one place, the method table's `CallerGate`, on the
/// front door's path too: the front door answers only while the gate holds no rules, and
/// under rules it hands each connection to NIO's pipeline (which identifies the caller and
/// asks the same gate) before reading a byte of it.
final class FrontDoorPolicyTests: XCTestCase {
    func testUnderRulesTheFrontDoorReadsNothingAndHandsTheConnectionOver() throws {
        let rules = CallerPolicy(rules: [AllowRule(executable: "/nonexistent/program", resources: ["now"])])
        let rig = try FrontDoorRig(policy: rules)
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        XCTAssertTrue(client.closedByPeer(), "handed over (the rig closes what it is handed), not answered")
        let handovers = rig.handovers.withLock { $0 }
        XCTAssertEqual(handovers.count, 1)
        XCTAssertNil(handovers.first?.unread, "not a byte read: the pipeline reads the request")
        XCTAssertNil(handovers.first?.adopted)
        XCTAssertEqual(handovers.first?.acceptedWithoutRules, false)
    }

    func testWithoutRulesTheSameRequestIsAnsweredAtTheFrontDoor() throws {
        let rig = try FrontDoorRig()
        let client = try rig.connect()
        client.send(FrontDoorRig.request(id: 1))
        XCTAssertEqual(client.readLines(1).first.map { $0.contains(#""id":1"#) }, true)
        XCTAssertTrue(rig.handovers.withLock { $0.isEmpty })
    }
}
