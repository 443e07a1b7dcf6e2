@testable import BrokerCore
import BrokerProtocol
import XCTest

/// `CallerGate.isOpen`, which the front door asks on every request instead of copying the
/// whole policy: it says what the policy in force says, from the start and after each
/// reload that adds or removes `[[allow]]` rules.
final class GateOpenFlagTests: XCTestCase {
    private static let rule = """
        [[allow]]
        exe = "/usr/bin/git"
        resources = ["https://api"]
        """

    func testTheFlagFollowsTheRulesAcrossReloads() async throws {
        let h = try await BrokerHarness()
        XCTAssertTrue(h.broker.gate.isOpen)
        _ = try await h.broker.reload(try BrokerHarness.config(extraConfig: Self.rule))
        XCTAssertFalse(h.broker.gate.policy.isOpen)
        XCTAssertFalse(h.broker.gate.isOpen, "rules in force: the front door must stop serving at once")
        _ = try await h.broker.reload(try BrokerHarness.config())
        XCTAssertTrue(h.broker.gate.isOpen)
    }

    func testABrokerStartedWithRulesIsNotOpen() async throws {
        let h = try await BrokerHarness(extraConfig: Self.rule)
        XCTAssertFalse(h.broker.gate.isOpen)
    }
}
