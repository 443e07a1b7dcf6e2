@testable import BrokerCore
@testable import BrokerServer
import Logging
import XCTest

/// The connection's types stay small (issue 23: at most 12 stored properties a class): state
/// that moves together is a value named for what it holds (`BackPressure`, `InFlightWork`,
/// `ConnectionCaller`, `ServerContext`). Counted on live instances, so a property added
/// anywhere in the class counts.
final class TypeSizeTests: XCTestCase {
    private func storedProperties(_ instance: AnyObject) -> [String] {
        Mirror(reflecting: instance).children.map { $0.label ?? "?" }
    }

    func testTheRPCHandlerHoldsAtMostTwelveStoredProperties() {
        let handler = RPCHandler(table: MethodTable(), limits: ConnectionLimits(maxConnections: 10, idleTimeout: 60_000_000_000, stallTimeout: 5_000_000_000),
                                 server: ServerContext(counters: BrokerCounters(), activity: ServerActivity(), logger: Logger(label: "test")))
        let stored = storedProperties(handler)
        XCTAssertLessThanOrEqual(stored.count, 12, "\(stored)")
    }

    func testTheFrontDoorHoldsAtMostTwelveStoredProperties() throws {
        let rig = try FrontDoorRig()
        let stored = storedProperties(rig.door)
        XCTAssertLessThanOrEqual(stored.count, 12, "\(stored)")
    }
}
