import Foundation
import XCTest

@testable import SecretStore

/// Against the real kernel key retention service (keyrings(7)): every test uses a keyring of
/// its own in the user keyring ("authbroker-test-<uuid>") and removes it at the end, so the
/// tests neither see nor disturb the daemon's "authbroker" keyring.
final class KernelKeyringStoreTests: XCTestCase {
    private var ring = ""
    private var store: KernelKeyringStore!

    override func setUp() async throws {
        ring = "authbroker-test-\(UUID().uuidString)"
        store = KernelKeyringStore(keyringName: ring)
    }

    override func tearDown() async throws {
        store?.removeKeyring()
    }

    private func credential(provider: String = "corp", subject: String = "alice", secret: String = "{\"refresh_token\":\"r1\"}") -> StoredCredential {
        StoredCredential(
            provider: provider, issuer: "https://issuer.example/realms/test", clientID: "authbroker-test",
            subject: subject, label: "authbroker: \(provider) \(subject)", secret: secret)
    }

    private func sorted(_ credentials: [StoredCredential]) -> [StoredCredential] {
        credentials.sorted { ($0.provider, $0.subject) < ($1.provider, $1.subject) }
    }

    func testKind() {
        XCTAssertEqual(store.kind, "kernel-keyring")
    }

    func testCheckMakesTheNamedKeyringInTheUserKeyring() async throws {
        try await store.check()
        let keyctl = try XCTUnwrap(TestSupport.which("keyctl"), "keyctl (Debian's keyutils) is not installed: run scripts/setup")
        let found = try TestSupport.run(keyctl, ["search", "@u", "keyring", ring])
        XCTAssertEqual(found.status, 0, found.output)
    }

    func testSaveThenLoadAllReturnsTheSameAttributesLabelAndSecret() async throws {
        let saved = credential(secret: "{\"refresh_token\":\"r-1\",\n \"note\":\"grüße ✓\"}")
        try await store.save(saved)
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [saved])
    }

    func testSavingTheSameKeyAgainReplacesTheItem() async throws {
        try await store.save(credential(secret: "old"))
        var newer = credential(secret: "new")
        newer.label = "renamed"
        try await store.save(newer)
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [newer])
    }

    func testTwoProvidersAndTwoAccountsAreKeptApart() async throws {
        let items = [credential(provider: "corp"), credential(provider: "lab"), credential(provider: "lab", subject: "bob", secret: "b")]
        for item in items { try await store.save(item) }
        let loaded = try await store.loadAll()
        XCTAssertEqual(sorted(loaded), sorted(items))

        let removed = try await store.delete(items[1].key)
        XCTAssertTrue(removed)
        let remaining = try await store.loadAll()
        XCTAssertEqual(sorted(remaining), sorted([items[0], items[2]]))
        let again = try await store.delete(items[1].key)
        XCTAssertFalse(again, "a second delete finds nothing")
    }

    func testAttributeValuesWithSeparatorsDoNotCollide() async throws {
        // Spaces, percent signs and look-alike encodings stay distinct values.
        let a = StoredCredential(provider: "a b", issuer: "https://x/%20", clientID: "c d", subject: "s", label: "", secret: "1")
        let b = StoredCredential(provider: "a%20b", issuer: "https://x/ ", clientID: "c d", subject: "s", label: "", secret: "2")
        try await store.save(a)
        try await store.save(b)
        let loaded = try await store.loadAll()
        XCTAssertEqual(sorted(loaded), sorted([a, b]))
    }

    func testANewStoreObjectFindsTheItems() async throws {
        let saved = [credential(provider: "corp"), credential(provider: "lab")]
        for item in saved { try await store.save(item) }
        let restarted = KernelKeyringStore(keyringName: ring)
        let loaded = try await restarted.loadAll()
        XCTAssertEqual(sorted(loaded), sorted(saved))
    }

    func testLoadAllOnAnEmptyOrMissingKeyringIsEmpty() async throws {
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [])
        let removed = try await store.delete(credential().key)
        XCTAssertFalse(removed)
    }

    func testOtherKeysInTheKeyringAreIgnored() async throws {
        try await store.save(credential())
        let keyctl = try XCTUnwrap(TestSupport.which("keyctl"), "keyctl (Debian's keyutils) is not installed: run scripts/setup")
        let ring = try TestSupport.run(keyctl, ["search", "@u", "keyring", ring])
        let added = try TestSupport.run(keyctl, ["add", "user", "not-ours", "x", ring.output.trimmingCharacters(in: .whitespacesAndNewlines)])
        XCTAssertEqual(added.status, 0, added.output)
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [credential()])
    }

    func testNULAndOversizedValuesAreRefusedWithASentence() async throws {
        await assertThrows(.failed("the credential's secret contains a NUL character and cannot be stored")) { () async throws(StoreError) in
            try await store.save(credential(secret: "a\0b"))
        }
        do {
            try await store.save(credential(secret: String(repeating: "s", count: 40_000)))
            XCTFail("a 40 kB secret was stored")
        } catch {
            XCTAssertTrue(error.message.contains("too large"), error.message)
            XCTAssertFalse(error.message.contains("sssss"), "the error shows the secret")
        }
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [])
    }

    /// A user's key quota (kernel.keys.maxbytes, 20000 bytes for users other than root)
    /// filled: a sentence naming the sysctls, nothing stored. As root the test runs as a
    /// child under an unused uid, whose quota is the users' one.
    func testAFullQuotaIsASentence() async throws {
        if geteuid() == 0 {
            var environment = TestSupport.environment
            environment["AUTHBROKER_TEST_KEYRING_CHILD"] = ring
            let child = try TestSupport.runTestAsAnotherUser(
                "SecretStoreTests.KernelKeyringStoreTests/testChildFillsItsQuota", uid: 4247, environment: environment)
            XCTAssertEqual(child.status, 0, child.output)
            XCTAssertTrue(child.output.contains("Executed 1 test"), child.output)
        } else {
            try await fillTheQuota(store)
        }
    }

    /// Runs only as the child of the test above.
    func testChildFillsItsQuota() async throws {
        guard let name = TestSupport.environment["AUTHBROKER_TEST_KEYRING_CHILD"] else {
            throw XCTSkip("runs as the child of testAFullQuotaIsASentence")
        }
        store = KernelKeyringStore(keyringName: name)
        try await fillTheQuota(store)
    }

    private func fillTheQuota(_ store: KernelKeyringStore) async throws {
        do {
            try await store.save(credential(secret: String(repeating: "q", count: 25_000)))
            XCTFail("25 kB stored within a 20 kB quota")
        } catch {
            XCTAssertEqual(error.reason, "failed")
            XCTAssertTrue(error.message.contains("quota is full") && error.message.contains("kernel.keys.maxbytes"), error.message)
        }
        let loaded = try await store.loadAll()
        XCTAssertEqual(loaded, [])
    }

    // MARK: expiry (issue 38 item 5: the user keyring belongs to the uid number, so a key
    // with no expiry is read by the next account given that uid after `userdel`)

    /// The expiry column of the key's line in /proc/keys ("perm", "59m", "1h", "4w"…).
    private func expiry(of credential: StoredCredential) throws -> String {
        let keyctl = try XCTUnwrap(TestSupport.which("keyctl"), "keyctl (Debian's keyutils) is not installed: run scripts/setup")
        let ringSerial = try TestSupport.run(keyctl, ["search", "@u", "keyring", ring])
        XCTAssertEqual(ringSerial.status, 0, ringSerial.output)
        let found = try TestSupport.run(keyctl, ["search", ringSerial.output.trimmingCharacters(in: .whitespacesAndNewlines), "user",
                                                 try KernelKeyringStore.description(of: credential.key)])
        XCTAssertEqual(found.status, 0, found.output)
        let serial = try XCTUnwrap(Int32(found.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        let hex = String(UInt32(bitPattern: serial), radix: 16)
        let padded = String(repeating: "0", count: max(0, 8 - hex.count)) + hex
        let lines = try String(contentsOfFile: "/proc/keys", encoding: .utf8).split(separator: "\n")
        let line = try XCTUnwrap(lines.first { $0.hasPrefix(padded + " ") }, "key \(padded) is not in /proc/keys")
        return String(line.split(separator: " ", omittingEmptySubsequences: true)[3])
    }

    func testASavedKeyExpiresAfterTheTTL() async throws {
        XCTAssertEqual(KernelKeyringStore().keyTTL, 30 * 86_400, "30 days by default")
        store = KernelKeyringStore(keyringName: ring, keyTTL: 5400)
        try await store.save(credential())
        XCTAssertEqual(try expiry(of: credential()), "1h", "5400 s (whole hours shown), a moment ago")
        // Saving again (a rotated refresh token) sets it anew: a replaced payload keeps the old one.
        try await KernelKeyringStore(keyringName: ring, keyTTL: 630).save(credential(secret: "rotated"))
        XCTAssertEqual(try expiry(of: credential()), "10m")
    }

    func testLoadingAndRenewingGiveTheKeysTheirWholeLifeAgain() async throws {
        try await KernelKeyringStore(keyringName: ring, keyTTL: 630).save(credential())
        XCTAssertEqual(try expiry(of: credential()), "10m")
        let loaded = try await KernelKeyringStore(keyringName: ring, keyTTL: 5400).loadAll()
        XCTAssertEqual(loaded.count, 1)
        XCTAssertEqual(try expiry(of: credential()), "1h", "loaded is in use: renewed")
        let renewing = KernelKeyringStore(keyringName: ring, keyTTL: 216_000)
        XCTAssertEqual(try renewing.renewAll(), 1)
        XCTAssertEqual(try expiry(of: credential()), "2d")
        XCTAssertEqual(renewing.renewalInterval, .seconds(54_000), "a quarter of the life")
        XCTAssertEqual(KernelKeyringStore(keyringName: ring).renewalInterval, .seconds(86_400), "a day at the most")
        // 0: no expiry, and one set before is taken away.
        let forever = KernelKeyringStore(keyringName: ring, keyTTL: 0)
        XCTAssertNil(forever.renewalInterval)
        try await forever.save(credential())
        XCTAssertEqual(try expiry(of: credential()), "perm")
    }

    func testAnExpiredKeyIsGone() async throws {
        store = KernelKeyringStore(keyringName: ring, keyTTL: 1)
        try await store.save(credential())
        try await Task.sleep(for: .milliseconds(2100))
        let loaded = try await KernelKeyringStore(keyringName: ring, keyTTL: 600).loadAll()
        XCTAssertEqual(loaded, [], "an expired key was still read")
    }

    /// A process whose session keyring does not lead to the user keyring (systemd's
    /// KeyringMode=private, `keyctl session -`, cron) reads what another process stored.
    func testAProcessInAPrivateSessionKeyringFindsTheItems() async throws {
        try await store.save(credential(secret: "from-the-parent"))
        let keyctl = try XCTUnwrap(TestSupport.which("keyctl"), "keyctl (Debian's keyutils) is not installed: run scripts/setup")
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var environment = TestSupport.environment
        environment["AUTHBROKER_TEST_KEYRING_CHILD"] = ring
        let child = try TestSupport.run(
            keyctl, ["session", "-", executable, "SecretStoreTests.KernelKeyringStoreTests/testChildReadsTheParentsItem"],
            environment: environment, timeout: 120)
        XCTAssertEqual(child.status, 0, child.output)
        XCTAssertTrue(child.output.contains("Executed 1 test"), child.output)
    }

    /// Runs only as the child of the test above.
    func testChildReadsTheParentsItem() async throws {
        guard let parent = TestSupport.environment["AUTHBROKER_TEST_KEYRING_CHILD"] else {
            throw XCTSkip("runs as the child of testAProcessInAPrivateSessionKeyringFindsTheItems")
        }
        store = nil  // the parent removes its keyring
        let loaded = try await KernelKeyringStore(keyringName: parent).loadAll()
        XCTAssertEqual(loaded.map(\.secret), ["from-the-parent"])
    }
}
