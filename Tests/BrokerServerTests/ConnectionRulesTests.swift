@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Logging
import XCTest

/// The rules both holders of a connection (the front door and NIO's pipeline) call, without
/// a socket: the connection cap, the requests-in-flight cap, request counting, and the close
/// once the peer is done.
final class ConnectionRulesTests: XCTestCase {
    private func rules(maxConnections: Int = 2, maxRequestsInFlight: Int = 1) -> ConnectionRules {
        ConnectionRules(limits: ConnectionLimits(maxConnections: maxConnections, idleTimeout: 60_000_000_000, stallTimeout: 5_000_000_000,
                                                 maxRequestsInFlight: maxRequestsInFlight),
                        server: Handlers.server())
    }

    func testAConnectionPastTheCapIsRefusedWithTheLimitInItsSentence() throws {
        let rules = rules(maxConnections: 2)
        XCTAssertNil(rules.refusal(connectingWith: 1), "the second connection is served")
        let refusal = try XCTUnwrap(rules.refusal(connectingWith: 2))
        XCTAssertEqual(refusal.code, RPCErrorCode.overloaded.rawValue)
        XCTAssertEqual(refusal.message, "authbrokerd has 2 connections open already; close some and try again")
        XCTAssertEqual(refusal.data?.limit, 2)
    }

    func testWorkPastTheRequestsInFlightCapIsRefusedAndCountedAsAnError() throws {
        let rules = rules(maxRequestsInFlight: 1)
        XCTAssertNil(rules.startWork())
        XCTAssertEqual(rules.server.activity.requestsInFlight, 1, "started work is in flight")
        let refusal = try XCTUnwrap(rules.startWork())
        XCTAssertEqual(refusal.message, "authbrokerd is working on 1 requests already; try again shortly")
        XCTAssertEqual(rules.server.counters.snapshot().errors, 1)
        XCTAssertEqual(rules.server.activity.requestsInFlight, 1, "refused work is not in flight")
    }

    func testEachRequestIsCountedOnce() {
        let rules = rules()
        rules.countRequest()
        rules.countRequest()
        XCTAssertEqual(rules.server.counters.snapshot().requests, 2)
    }

    func testAConnectionWhosePeerIsDoneClosesOnlyOnceNothingIsOwed() {
        typealias Owing = ConnectionRules.Owing
        XCTAssertTrue(ConnectionRules.closesOncePeerDone(true, owing: .nothing))
        XCTAssertFalse(ConnectionRules.closesOncePeerDone(false, owing: .nothing), "the peer may still ask")
        XCTAssertFalse(ConnectionRules.closesOncePeerDone(true, owing: Owing(answers: true)), "an answer in the works is still read")
        XCTAssertFalse(ConnectionRules.closesOncePeerDone(true, owing: Owing(input: true)), "a line it sent is still answered")
        XCTAssertFalse(ConnectionRules.closesOncePeerDone(true, owing: Owing(unsent: true)), "an answer not yet taken")
    }
}
