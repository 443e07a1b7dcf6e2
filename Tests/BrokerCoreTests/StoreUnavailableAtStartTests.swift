@testable import BrokerCore
import BrokerProtocol
import XCTest

/// A store that cannot be read at start (a locked or missing keyring; the STUB store of the
/// harness refusing reads): the broker starts anyway, says why to every request that needs
/// a stored account, and loads the accounts once the store answers, without a restart.
final class StoreUnavailableAtStartTests: XCTestCase {
    func testRequestsThatNeedTheStoreGetItsReasonNotNotSignedIn() async throws {
        let h = try await BrokerHarness(storeFailsAtStart: true)
        XCTAssertEqual(h.broker.accounts.storeFailure?.reason, "locked")
        guard case .storeUnavailable(let message, let reason)? = await h.tokenError() else {
            return XCTFail("expected -32005")
        }
        XCTAssertEqual(reason, "locked")
        XCTAssertTrue(message.contains("the STUB store is locked"), message)
        XCTAssertEqual(h.broker.status.status().storeUnavailable, StoreUnavailableStatus(reason: "locked", message: "the STUB store is locked"))
        do throws(BrokerError) {
            _ = try await h.broker.signIns.startLogin(LoginStartParams(provider: "corp", flow: .device))
            XCTFail("a sign-in started whose refresh token could not be kept")
        } catch {
            guard case .storeUnavailable(let message, _) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("cannot sign in to corp now"), message)
        }
    }

    func testTheAccountsAreLoadedWhenTheStoreAnswersAgain() async throws {
        let h = try await BrokerHarness(storeFailsAtStart: true)
        _ = await h.tokenError()
        h.store.failReads(false)
        for _ in 0..<500 where h.broker.accounts.storeFailure != nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertNil(h.broker.accounts.storeFailure)
        XCTAssertNil(h.broker.status.status().storeUnavailable)
        XCTAssertEqual(h.broker.accounts.accountList().accounts.map(\.subject), ["sub-alice"])
        _ = try await h.token()
    }

    func testAReloadWhileTheStoreIsUnavailableTakesEffect() async throws {
        let h = try await BrokerHarness(storeFailsAtStart: true)
        _ = try await h.broker.reload(try BrokerHarness.config(clientID: "authbroker-2"))
        XCTAssertEqual(h.broker.config.providers.map(\.clientID), ["authbroker-2"])
        XCTAssertNotNil(h.broker.accounts.storeFailure, "still waiting for the store")
    }
}
