import Foundation
import XCTest

@testable import SecretStore

/// Against a real Secret Service: the session bus of the test process with an unlocked
/// gnome-keyring (scripts/with-keyring). Every test uses its own provider value
/// ("test-<uuid>") and removes what it stored.
final class SecretServiceStoreTests: XCTestCase {
    private var provider = ""
    private let store = SecretServiceStore(timeout: .seconds(10))

    override func setUp() async throws {
        try TestSupport.skipUnlessKeyring()
        provider = "test-\(UUID().uuidString)"
    }

    override func tearDown() async throws {
        guard !provider.isEmpty else { return }
        for credential in (try? await mine()) ?? [] {
            _ = try? await store.delete(credential.key)
        }
        if let secretTool = TestSupport.which("secret-tool") {
            // Items stored by secret-tool in testItemsOfAnotherSchemaAreIgnored.
            _ = try? TestSupport.run(secretTool, ["clear", "provider", provider])
        }
    }

    private func credential(subject: String = "alice", secret: String = "{\"refresh_token\":\"r1\"}") -> StoredCredential {
        StoredCredential(
            provider: provider,
            issuer: "https://issuer.example/realms/test",
            clientID: "authbroker-test",
            subject: subject,
            label: "authbroker: \(provider) \(subject)",
            secret: secret
        )
    }

    /// This test's items (the keyring may hold others).
    private func mine() async throws(StoreError) -> [StoredCredential] {
        try await store.loadAll().filter { $0.provider == provider }.sorted { $0.subject < $1.subject }
    }

    func testKind() {
        XCTAssertEqual(store.kind, "secret-service")
    }

    func testCheckSucceedsWithAnUnlockedKeyring() async throws {
        try await store.check()
    }

    func testSaveThenLoadAllReturnsTheSameAttributesAndSecret() async throws {
        // A secret with JSON, quotes, a newline and non-ASCII text survives as it is.
        let saved = credential(secret: "{\"refresh_token\":\"r-1\",\n \"note\":\"grüße ✓\"}")
        try await store.save(saved)
        let loaded = try await mine()
        XCTAssertEqual(loaded, [saved])
    }

    func testSavingTheSameKeyAgainReplacesTheItem() async throws {
        try await store.save(credential(secret: "first"))
        var second = credential(secret: "second")
        second.label = "authbroker: renamed"
        try await store.save(second)
        let loaded = try await mine()
        XCTAssertEqual(loaded.count, 1)
        XCTAssertEqual(loaded.first?.secret, "second")
        XCTAssertEqual(loaded.first?.label, "authbroker: renamed")
    }

    func testTwoSubjectsAreTwoItems() async throws {
        let alice = credential(subject: "alice", secret: "a")
        let bob = credential(subject: "bob", secret: "b")
        try await store.save(alice)
        try await store.save(bob)
        let loaded = try await mine()
        XCTAssertEqual(loaded, [alice, bob])
    }

    func testDeleteRemovesTheItemAndReportsIt() async throws {
        let alice = credential(subject: "alice")
        let bob = credential(subject: "bob")
        try await store.save(alice)
        try await store.save(bob)

        let first = try await store.delete(alice.key)
        XCTAssertTrue(first)
        let remaining = try await mine()
        XCTAssertEqual(remaining, [bob])

        let second = try await store.delete(alice.key)
        XCTAssertFalse(second)
    }

    func testDeletingAnUnknownKeyReturnsFalse() async throws {
        let removed = try await store.delete(credential(subject: "nobody").key)
        XCTAssertFalse(removed)
    }

    func testConcurrentSavesFromManyTasksAllLand() async throws {
        let credentials = (0..<8).map { credential(subject: "user-\($0)", secret: "secret-\($0)") }
        let store = self.store
        try await withThrowingTaskGroup(of: Void.self) { group in
            for item in credentials {
                group.addTask { try await store.save(item) }
            }
            try await group.waitForAll()
        }
        let loaded = try await mine()
        XCTAssertEqual(loaded, credentials.sorted { $0.subject < $1.subject })
    }

    /// The item is a normal Secret Service item: another client (secret-tool) sees its
    /// label, schema and attributes.
    func testItemIsVisibleToAnotherSecretServiceClient() async throws {
        guard let secretTool = TestSupport.which("secret-tool") else {
            throw XCTSkip("secret-tool (libsecret-tools) is not installed")
        }
        let saved = credential(subject: "carol")
        try await store.save(saved)

        let result = try TestSupport.run(secretTool, ["search", "--all", "provider", provider])
        XCTAssertEqual(result.status, 0, result.output)
        // secret-tool 0.20 prints label/secret/schema to stdout and the attributes to stderr.
        for line in [
            "label = \(saved.label)",
            "schema = org.authbroker.Credential",
            "attribute.provider = \(provider)",
            "attribute.issuer = \(saved.issuer)",
            "attribute.client_id = \(saved.clientID)",
            "attribute.subject = carol",
        ] {
            XCTAssertTrue(result.output.contains(line), "missing \"\(line)\" in:\n\(result.output)")
        }
    }

    /// An item with the same attributes but without `xdg:schema = org.authbroker.Credential`
    /// (here: stored by secret-tool, which uses no schema) is not ours and is not returned.
    func testItemsOfAnotherSchemaAreIgnored() async throws {
        guard let secretTool = TestSupport.which("secret-tool") else {
            throw XCTSkip("secret-tool (libsecret-tools) is not installed")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: secretTool)
        process.arguments = [
            "store", "--label=not authbroker", "provider", provider, "issuer", "i", "client_id", "c", "subject", "dave",
        ]
        let input = Pipe()
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data("foreign".utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)

        let found = try TestSupport.run(secretTool, ["search", "--all", "provider", provider])
        XCTAssertTrue(found.output.contains("label = not authbroker"), found.output)

        let loaded = try await mine()
        XCTAssertEqual(loaded, [])
    }
}

/// Input that cannot go to libsecret as C strings is refused before any call (no
/// Secret Service needed).
final class SecretServiceValidationTests: XCTestCase {
    private let store = SecretServiceStore()
    private let credential = StoredCredential(
        provider: "test-validation", issuer: "https://issuer.example", clientID: "c", subject: "alice",
        label: "authbroker: validation", secret: "s"
    )

    func testNULInAnAttributeIsRefusedWithoutReachingLibsecret() async {
        var bad = credential
        bad.subject = "ali\u{0}ce"
        await assertThrows(.failed("the credential's subject contains a NUL character and cannot be stored")) {
            () async throws(StoreError) in try await store.save(bad)
        }
    }

    func testNULInTheSecretIsRefusedWithoutShowingIt() async {
        var bad = credential
        bad.secret = "top-secret-value\u{0}tail"
        bad.label = "label"
        do {
            try await store.save(bad)
            XCTFail("a secret with NUL must be refused")
        } catch {
            XCTAssertFalse(error.message.contains("top-secret-value"))
            XCTAssertFalse("\(error)".contains("top-secret-value"))
        }
    }
}

/// The store without a usable Secret Service: no session bus, no Secret Service on the
/// bus, a locked keyring. libsecret binds to the session bus the first time it is used in
/// a process, so each case runs `testChildProcessScenario` in a child process (this test
/// bundle again) whose environment points at a private session of its own.
final class SecretServiceFailureTests: XCTestCase {
    private static let childTest = "SecretStoreTests.SecretServiceFailureTests/testChildProcessScenario"
    private static let scenarioVariable = "AUTHBROKER_SECRET_STORE_TEST_SCENARIO"

    /// A session bus on which no Secret Service runs or can be activated.
    func testNoSecretServiceOnTheBusIsUnavailable() throws {
        let session = try PrivateSession(withKeyring: false)
        defer { session.stop() }
        try assertScenarioPasses("no-secret-service", environment: session.environment)
    }

    /// No session bus at all: no address, no $XDG_RUNTIME_DIR/bus, no X11 display.
    func testNoSessionBusIsUnavailable() throws {
        let runtime = try TestSupport.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: runtime) }
        var environment = TestSupport.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["DISPLAY"] = nil
        environment["XDG_RUNTIME_DIR"] = runtime.path
        try assertScenarioPasses("no-session-bus", environment: environment)
    }

    /// A keyring whose login collection gets locked (after an item was stored): every
    /// call says so, `delete` included (libsecret skips locked items silently).
    func testLockedKeyringIsReportedAsLocked() throws {
        let session = try PrivateSession(withKeyring: true)
        defer { session.stop() }
        try assertScenarioPasses("locked", environment: session.environment)
    }

    /// A Secret Service that takes D-Bus calls but never answers: every call fails with
    /// `.timedOut` after the store's timeout (1 s here), not libsecret's 25 s, and a
    /// timed-out call does not hold up the next one.
    func testHungSecretServiceTimesOut() throws {
        let session = try PrivateSession(withKeyring: true)
        defer { session.stop() }
        session.freezeKeyring(true)
        try assertScenarioPasses("hung", environment: session.environment)
    }

    /// gnome-keyring killed (SIGKILL) and started again on the same bus and keyring file,
    /// under a new unique bus name, while the process keeps running: a write during the
    /// outage says the Secret Service is missing, and once it is back every call works
    /// again without restarting the process (libsecret's shared proxy would otherwise stay
    /// bound to the dead keyring's bus name and session).
    func testKeyringRestartedUnderANewBusNameIsUsedAgain() throws {
        let session = try PrivateSession(withKeyring: true)
        defer { session.stop() }
        try assertScenarioPasses("restarted", environment: session.environment)
    }

    /// Runs `testChildProcessScenario` in a child process with `environment` and the
    /// scenario's name, and checks that the scenario passed there.
    private func assertScenarioPasses(_ scenario: String, environment: [String: String],
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        var environment = environment
        environment[Self.scenarioVariable] = scenario
        let result = try TestSupport.runTestInChildProcess(Self.childTest, environment: environment)
        XCTAssertEqual(result.status, 0, result.output, file: file, line: line)
        XCTAssertTrue(result.output.contains("SCENARIO PASSED: \(scenario)"), result.output, file: file, line: line)
    }

    /// Runs only in the child processes started above.
    func testChildProcessScenario() async throws {
        guard let scenario = TestSupport.environment[Self.scenarioVariable] else {
            throw XCTSkip("runs only in a child process started by the other tests of this class")
        }
        let store = SecretServiceStore(timeout: scenario == "hung" ? .seconds(1) : .seconds(20))
        let key = CredentialKey(provider: "test-\(UUID().uuidString)", issuer: "i", clientID: "c", subject: "s")
        let credential = StoredCredential(
            provider: key.provider, issuer: key.issuer, clientID: key.clientID, subject: key.subject,
            label: "l", secret: "s"
        )
        let expected: StoreError
        switch scenario {
        case "no-secret-service":
            expected = .unavailable(SecretServiceErrors.noSecretService)
        case "no-session-bus":
            expected = .unavailable(SecretServiceErrors.noSessionBus)
        case "locked":
            expected = .locked(SecretServiceErrors.locked)
            try await store.check()
            try await store.save(credential)
            try lockLoginCollection()
        case "hung":
            expected = .timedOut(seconds: 1)
        case "restarted":
            try await keyringRestartScenario(store: store, credential: credential)
            if testRun?.failureCount == 0 {
                print("SCENARIO PASSED: \(scenario)")
            }
            return
        default:
            XCTFail("unknown scenario \(scenario)")
            return
        }
        let clock = ContinuousClock()
        let start = clock.now
        await assertThrows(expected) { () async throws(StoreError) in try await store.check() }
        await assertThrows(expected) { () async throws(StoreError) in try await store.save(credential) }
        await assertThrows(expected) { () async throws(StoreError) in try await store.loadAll() }
        await assertThrows(expected) { () async throws(StoreError) in try await store.delete(key) }
        if scenario == "hung" {
            // Four calls of at most 1 s each: none waited for an abandoned one.
            XCTAssertLessThan(clock.now - start, .seconds(8))
        }
        if testRun?.failureCount == 0 {
            print("SCENARIO PASSED: \(scenario)")
        }
    }

    /// Uses the keyring, kills it, writes during the outage, starts it again on the same
    /// bus and home, and uses it again from the same process.
    private func keyringRestartScenario(store: SecretServiceStore, credential: StoredCredential) async throws {
        let environment = TestSupport.environment
        try await store.check()
        try await store.save(credential)
        guard let pid = try KeyringProcess.ownerPID(environment: environment) else {
            XCTFail("no owner of org.freedesktop.secrets")
            return
        }
        kill(pid, SIGKILL)
        XCTAssertTrue(try KeyringProcess.waitForOwner(present: false, environment: environment))
        var rotated = credential
        rotated.secret = "rotated during the outage"
        await assertThrows(.unavailable(SecretServiceErrors.noSecretService)) { () async throws(StoreError) in
            try await store.save(rotated)
        }

        let restarted = try KeyringProcess.launch(environment: environment)
        // Not waited for: Foundation notices this exit only once every holder of an
        // inherited descriptor is gone; the process ends with this child process anyway.
        defer { restarted.terminate() }
        try await store.check()
        let before = try await store.loadAll().filter { $0.key == credential.key }
        XCTAssertEqual(before, [credential])
        try await store.save(rotated)
        let after = try await store.loadAll().filter { $0.key == credential.key }
        XCTAssertEqual(after, [rotated])
        let removed = try await store.delete(credential.key)
        XCTAssertTrue(removed)
    }

    /// Locks gnome-keyring's login collection (Lock needs no prompt; unlocking would).
    private func lockLoginCollection() throws {
        guard let gdbus = TestSupport.which("gdbus") else {
            throw XCTSkip("gdbus is not installed")
        }
        let result = try TestSupport.run(
            gdbus,
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']",
            ],
            timeout: 20
        )
        XCTAssertEqual(result.status, 0, result.output)
    }
}
