import XCTest
import BrokerClient
import BrokerProtocol
@testable import authctl

/// authctl newer than the daemon that answers it: an upgrade installed a new authctl while
/// the old authbrokerd still runs (or runs on: started by hand, or with the memory store).
final class OlderDaemonTests: XCTestCase {
    func testAMethodTheDaemonDoesNotKnowSaysItIsOlderAndToRestartIt() {
        let refused = RPCError(.methodNotFound, "there is no method \"token.reject\": see docs/protocol.md for the methods")
        let sentence = DaemonCall.sentence(for: .rpc(refused), environment: { _ in nil })
        XCTAssertTrue(sentence.hasPrefix(refused.message), sentence)
        XCTAssertTrue(sentence.contains("older than this authctl"), sentence)
        XCTAssertTrue(sentence.contains("systemctl --user restart authbroker.service"), sentence)
    }

    func testOtherDaemonErrorsAreItsOwnSentence() {
        let refused = RPCError(.loginRequired, "not signed in to corp: run `authctl login --provider corp`")
        XCTAssertEqual(DaemonCall.sentence(for: .rpc(refused), environment: { _ in nil }), refused.message)
    }
}
