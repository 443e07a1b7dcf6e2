@testable import BrokerCore
import BrokerProtocol
import XCTest

/// "ready" means saved (issue 37): an account whose newest refresh token only the daemon's
/// memory holds (the STUB store of the harness refuses writes, as a locked keyring, a bus
/// gone or a full disk would) is listed as such, with why and what a restart would cost,
/// until the store takes it; and accounts that cannot be read are not "no accounts".
final class ReadyMeansSavedTests: XCTestCase {
    func testARotationTheStoreRefusedIsListedAsOnlyInMemoryUntilItIsWritten() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))
        XCTAssertNil(h.broker.accounts.accountList().accounts[0].unsaved, "saved at start")
        h.store.failSaves(true)
        _ = try await h.token()
        let listed = h.broker.accounts.accountList().accounts[0]
        XCTAssertEqual(listed.state, .ready)
        XCTAssertEqual(listed.unsavedReason, "unavailable")
        XCTAssertEqual(listed.unsaved, "its newest refresh token is only in authbrokerd's memory (the secret store refused it: the STUB store refuses writes); authbrokerd writes it as soon as the store takes it, and a restart or reboot before then loses this sign-in")
        let status = h.broker.status.status().providers.flatMap(\.accounts).map(\.account)
        XCTAssertEqual(status.first?.unsavedReason, "unavailable", "authctl status says it too")

        h.store.failSaves(false)
        for _ in 0..<800 where h.broker.accounts.accountList().accounts[0].unsaved != nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertNil(h.broker.accounts.accountList().accounts[0].unsaved, "the background retry wrote it")
    }

    func testAccountsTheStoreCannotReadAreNotNoAccounts() async throws {
        let h = try await BrokerHarness(storeFailsAtStart: true)
        let listed = h.broker.accounts.accountList()
        XCTAssertEqual(listed.accounts, [])
        XCTAssertEqual(listed.storeUnreadable, "the sign-ins kept in the secret store cannot be read yet (the STUB store is locked); they are listed once authbrokerd can read it")
    }
}

/// A store that was read at start but cannot be used now (a keyring locked since): a sign-in
/// is refused before the user approves anything (issue 37: a device sign-in was refused only
/// after the user approved it on the phone).
final class SignInNeedsAUsableStoreTests: XCTestCase {
    func testASignInIsRefusedAtOnceWhenTheStoreCannotBeUsedNow() async throws {
        let h = try await BrokerHarness()
        h.store.failReads(true)
        do throws(BrokerError) {
            _ = try await h.broker.signIns.startLogin(LoginStartParams(provider: "corp", flow: .device))
            XCTFail("a sign-in started whose refresh token could not be kept")
        } catch {
            guard case .storeUnavailable(let message, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(reason, "locked")
            XCTAssertEqual(message, "cannot sign in to corp now: the secret store that keeps sign-ins cannot be used (the STUB store is locked); nothing was sent to corp")
        }
        XCTAssertEqual(h.transport.tokenRequests.count, 0)
    }
}
