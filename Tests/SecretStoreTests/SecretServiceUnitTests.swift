import Foundation
import XCTest

@testable import SecretStore

/// The parts that need no Secret Service: time limit, error sentences, redaction.
final class BlockingCallTests: XCTestCase {
    func testResultComesBackBeforeTheTimeout() async throws {
        let value = try await BlockingCall.run(timeout: .seconds(5)) { _ in .success(42) }
        XCTAssertEqual(value, 42)
    }

    func testErrorComesBackAsItIs() async {
        await assertThrows(.locked("x")) { () async throws(StoreError) in
            try await BlockingCall.run(timeout: .seconds(5)) { _ -> Result<Int, StoreError> in .failure(.locked("x")) }
        }
    }

    /// A call that blocks is abandoned at the timeout with `.timedOut`, its GCancellable is
    /// cancelled (so libsecret returns at once), and the queue is free again afterwards.
    func testABlockedCallTimesOutAndIsCancelled() async throws {
        let sawCancel = expectation(description: "the blocked call sees the cancellation")
        let clock = ContinuousClock()
        let start = clock.now
        await assertThrows(.timedOut(seconds: 1)) { () async throws(StoreError) in
            try await BlockingCall.run(timeout: .milliseconds(200)) { cancellation -> Result<Int, StoreError> in
                // Stands in for a libsecret call waiting on D-Bus: it returns when cancelled.
                let deadline = Date().addingTimeInterval(10)
                while !cancellation.isCancelled && Date() < deadline {
                    usleep(5_000)
                }
                if cancellation.isCancelled { sawCancel.fulfill() }
                return .success(1)
            }
        }
        XCTAssertLessThan(clock.now - start, .seconds(2))
        await fulfillment(of: [sawCancel], timeout: 5)

        // The serial queue is not held by the abandoned call.
        let next = try await BlockingCall.run(timeout: .seconds(2)) { _ in .success("next") }
        XCTAssertEqual(next, "next")
    }

    /// Cancelling the calling task cancels the libsecret call too.
    func testCancellingTheTaskCancelsTheCall() async throws {
        let started = expectation(description: "call started")
        let task = Task { () async throws(StoreError) -> Bool in
            try await BlockingCall.run(timeout: .seconds(30)) { cancellation -> Result<Bool, StoreError> in
                started.fulfill()
                let deadline = Date().addingTimeInterval(10)
                while !cancellation.isCancelled && Date() < deadline {
                    usleep(5_000)
                }
                return .success(cancellation.isCancelled)
            }
        }
        await fulfillment(of: [started], timeout: 5)
        task.cancel()
        let sawCancel = try await task.value
        XCTAssertTrue(sawCancel)
    }

    func testTimeoutIsShownInWholeSecondsRoundedUp() {
        XCTAssertEqual(BlockingCall.wholeSeconds(.seconds(10)), 10)
        XCTAssertEqual(BlockingCall.wholeSeconds(.milliseconds(2500)), 3)
        XCTAssertEqual(BlockingCall.wholeSeconds(.milliseconds(1)), 1)
        XCTAssertEqual(BlockingCall.wholeSeconds(.zero), 1)
    }

    func testDefaultTimeoutIsTenSeconds() {
        XCTAssertEqual(SecretServiceStore().timeout, .seconds(10))
    }
}

final class SecretServiceErrorsTests: XCTestCase {
    private func map(_ message: String, locked: Bool = false, cancelled: Bool = false, save: Bool = false) -> StoreError {
        SecretServiceErrors.storeError(message: message, isLocked: locked, isCancelled: cancelled, duringSave: save)
    }

    func testNoSessionBus() {
        // DBUS_SESSION_BUS_ADDRESS unset, no $DISPLAY:
        XCTAssertEqual(map("Cannot autolaunch D-Bus without X11 $DISPLAY"), .unavailable(SecretServiceErrors.noSessionBus))
        // ... with a $DISPLAY, GLib runs dbus-launch, which fails:
        XCTAssertEqual(
            map("Error spawning command line “dbus-launch --autolaunch=3d12 --binary-syntax --close-stderr”: Child process exited with code 1"),
            .unavailable(SecretServiceErrors.noSessionBus)
        )
        XCTAssertEqual(
            map("Cannot determine session bus address (DBUS_SESSION_BUS_ADDRESS not set)"),
            .unavailable(SecretServiceErrors.noSessionBus)
        )
        XCTAssertTrue(SecretServiceErrors.noSessionBus.contains("store = \"memory\""))
    }

    func testSessionBusAddressThatIsGone() {
        let error = map("Could not connect: No such file or directory")
        guard case .unavailable(let message) = error else {
            return XCTFail("\(error)")
        }
        XCTAssertTrue(message.contains("Could not connect: No such file or directory"), message)
        XCTAssertTrue(message.contains("DBUS_SESSION_BUS_ADDRESS"), message)
    }

    func testNoSecretService() {
        XCTAssertEqual(
            map("The name org.freedesktop.secrets was not provided by any .service files"),
            .unavailable(SecretServiceErrors.noSecretService)
        )
        XCTAssertTrue(SecretServiceErrors.noSecretService.contains("gnome-keyring-daemon"))
        XCTAssertTrue(SecretServiceErrors.noSecretService.contains("store = \"kernel-keyring\""), "a host without a desktop keyring is offered the kernel keyring")
    }

    /// GDBus's words for a connection the bus closed (it stopped or restarted): the sentence
    /// names the bus, says the store connects again by itself, and warns against a restart
    /// while a refresh token is only in memory (the store's connection is its own and is
    /// made again, so a restart is not what helps).
    func testClosedSessionBusConnection() {
        let error = map("Error calling StartServiceByName for org.freedesktop.secrets: The connection is closed")
        XCTAssertEqual(error, .unavailable(SecretServiceErrors.sessionBusClosed))
        XCTAssertTrue(SecretServiceErrors.sessionBusClosed.contains("connects again by itself"))
        XCTAssertTrue(SecretServiceErrors.sessionBusClosed.contains("do not restart authbrokerd"))
        XCTAssertTrue(LibsecretError(message: "The connection is closed").isClosedConnection)
        XCTAssertFalse(LibsecretError(message: "The connection is closed", isCancelled: true).isClosedConnection)
        XCTAssertFalse(LibsecretError(message: "The session wrapping the secret does not exist").isClosedConnection)
    }

    func testLocked() {
        XCTAssertEqual(map("Cannot create an item in a locked collection", locked: true), .locked(SecretServiceErrors.locked))
        XCTAssertEqual(map("Cannot get secret of a locked object"), .locked(SecretServiceErrors.locked))
        XCTAssertTrue(SecretServiceErrors.locked.contains("gnome-keyring-daemon --unlock"))
    }

    func testMissingDefaultCollectionWhenSaving() {
        let message = "Object does not exist at path “/org/freedesktop/secrets/collection/login”"
        XCTAssertEqual(map(message, save: true), .unavailable(SecretServiceErrors.noDefaultCollection))
        XCTAssertEqual(map(message), .failed("the Secret Service failed: \(message)"))
        // An item that vanished is not a missing keyring.
        let item = "Object does not exist at path “/org/freedesktop/secrets/collection/login/12”"
        XCTAssertEqual(map(item, save: true), .failed("the Secret Service failed: \(item)"))
    }

    func testCancelled() {
        XCTAssertEqual(map("Operation was cancelled", cancelled: true), .failed(SecretServiceErrors.cancelled))
    }

    func testAnythingElseKeepsTheMessage() {
        XCTAssertEqual(map("Timeout was reached"), .failed("the Secret Service failed: Timeout was reached"))
    }

    /// What makes the store drop libsecret's connection and try again: a keyring that
    /// restarted (its unique name or session gone) or a closed bus connection; not a
    /// keyring that is simply not there, locked, or a cancelled call.
    func testOnlyAStaleConnectionIsReconnected() {
        XCTAssertTrue(LibsecretError(message: "The name :1.0 was not provided by any .service files").isStaleConnection)
        XCTAssertTrue(LibsecretError(message: "The session wrapping the secret does not exist").isStaleConnection)
        XCTAssertTrue(LibsecretError(message: "The connection is closed").isStaleConnection)
        XCTAssertFalse(LibsecretError(message: "The name org.freedesktop.secrets was not provided by any .service files").isStaleConnection)
        XCTAssertFalse(LibsecretError(message: "Cannot create an item in a locked collection", isLocked: true).isStaleConnection)
        XCTAssertFalse(LibsecretError(message: "The connection is closed", isCancelled: true).isStaleConnection)
    }
}

final class StoredCredentialRedactionTests: XCTestCase {
    private let credential = StoredCredential(
        provider: "p", issuer: "https://i", clientID: "c", subject: "s", label: "authbroker: p s",
        secret: "{\"refresh_token\":\"very-secret-token\"}"
    )

    func testDescriptionsHideTheSecret() {
        for text in ["\(credential)", String(describing: credential), String(reflecting: credential), "\([credential])"] {
            XCTAssertFalse(text.contains("very-secret-token"), text)
            XCTAssertTrue(text.contains("<redacted>"), text)
            XCTAssertTrue(text.contains("authbroker: p s"), text)
        }
    }

    func testDumpHidesTheSecret() {
        var dumped = ""
        dump(credential, to: &dumped)
        XCTAssertFalse(dumped.contains("very-secret-token"), dumped)
        XCTAssertTrue(dumped.contains("<redacted>"), dumped)
    }

    func testEqualityStillComparesTheSecret() {
        var other = credential
        other.secret = "different"
        XCTAssertNotEqual(credential, other)
    }
}
