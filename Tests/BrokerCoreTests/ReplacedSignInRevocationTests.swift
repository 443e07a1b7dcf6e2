@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import JWSTestSupport
import OAuth
import XCTest

/// Issue 38 item 5: a new sign-in of an account revokes the refresh token it replaces at the
/// provider (RFC 7009), and its answer says so. Before, the replaced one stayed alive at
/// the provider, usable by whoever had copied it. STUB provider recording revocations.
final class ReplacedSignInRevocationTests: XCTestCase {
    private var directory: URL?
    private var key: TestKey?

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// The sign-in's end (`SignInCompletion`) over the harness's services, and a token answer
    /// as the provider gives one at sign-in: a verified ID token for `sub-alice`.
    private func signIn(_ h: BrokerHarness, refreshToken: String, resource: String? = nil) async throws -> AccountInfo {
        let directory = try self.directory ?? OpenSSLTool.temporaryDirectory()
        self.directory = directory
        // One key per test: the verifier keeps the keys it read.
        let key = try self.key ?? TestKey.generate(.p256, in: directory)
        self.key = key
        try h.transport.publish([key.jwk(kid: "k1", alg: "ES256")])
        let now = Int(h.clock.now)
        let claims = #"{"iss":"\#(StubTransport.issuer)","aud":"authbroker","sub":"sub-alice","iat":\#(now),"exp":\#(now + 300),"name":"Alice"}"#
        let idToken = try TestJWS.compact(header: #"{"alg":"ES256","kid":"k1"}"#, payload: claims) { try key.sign($0, .es256) }
        let completion = SignInCompletion(
            providers: h.broker.providers, accounts: h.broker.accounts,
            tokens: h.broker.forgetting, events: h.broker.events.hub,
            logger: h.logs.logger, clock: h.clock.wallClock)
        let provider = try h.broker.providers.provider("corp")
        let metadata = try await provider.discovered()
        let answer = TokenResponse(accessToken: "sign-in-access", tokenType: "Bearer", expiresIn: 3600, refreshToken: refreshToken,
                                   idToken: idToken, scope: nil)
        return try await completion.completeLogin(answer, provider: provider, metadata: metadata, nonce: nil, dpop: nil, resource: resource)
    }

    private let alice = AccountKey(provider: "corp", subject: "sub-alice")

    func testANewSignInRevokesTheRefreshTokenItReplacesAndSaysSo() async throws {
        let h = try await BrokerHarness()
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        XCTAssertEqual(h.broker.accounts[alice]?.refreshToken, "refresh-0", "the harness's sign-in")
        let info = try await signIn(h, refreshToken: "refresh-new")
        XCTAssertEqual(h.transport.revocations, [fingerprint("refresh-0")], "the replaced refresh token was not revoked")
        XCTAssertEqual(h.broker.accounts[alice]?.refreshToken, "refresh-new")
        XCTAssertEqual(info.replacedSignIn, "the refresh token of the sign-in it replaced was revoked at corp")
        XCTAssertTrue(h.logs.all.joined(separator: "\n").contains("revoked the refresh token of the sign-in this one replaced"), h.logs.all.joined(separator: "\n"))
        XCTAssertFalse(h.logs.all.joined(separator: "\n").contains("refresh-0"), "the log shows the refresh token")
        // The answer carries it on the wire.
        let wire = String(decoding: try JSONEncoder().encode(info), as: UTF8.self)
        XCTAssertTrue(wire.contains(#""replaced_sign_in":"the refresh token of the sign-in it replaced was revoked at corp""#), wire)

        // The same refresh token handed out again is not revoked (it is the new sign-in's).
        let same = try await signIn(h, refreshToken: "refresh-new")
        XCTAssertNil(same.replacedSignIn)
        XCTAssertEqual(h.transport.revocations.count, 1)
    }

    /// Issue 37 item 1: the store went away after `login.start` found it usable (the bus
    /// restarted, the keyring locked, the disk filled): the sign-in the user approved is held
    /// in memory, listed as not saved, served, and written when the store takes it; nothing
    /// is revoked (before: "could not be stored", and what it issued was revoked).
    func testASignInTheStoreRefusesIsHeldInMemoryAndWrittenWhenTheStoreIsBack() async throws {
        let h = try await BrokerHarness()
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        h.store.failSaves(true)
        let info = try await signIn(h, refreshToken: "refresh-new")
        XCTAssertEqual(info.state, .ready)
        XCTAssertEqual(info.unsavedReason, "unavailable")
        XCTAssertTrue(info.unsaved?.contains("a restart or reboot before then loses this sign-in") == true, info.unsaved ?? "nil")
        XCTAssertEqual(h.transport.revocations, [], "neither the new sign-in nor the one it replaces is revoked")
        XCTAssertEqual(info.replacedSignIn, "the refresh token of the sign-in it replaced was not revoked, because the store still holds it until this one is written")
        XCTAssertEqual(h.broker.accounts.accountList().accounts.first?.unsavedReason, "unavailable")
        let before = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(before, fingerprint("refresh-0"))
        _ = try await h.token()

        h.store.failSaves(false)
        for _ in 0..<800 where h.broker.accounts.accountList().accounts.first?.unsaved != nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertNil(h.broker.accounts.accountList().accounts.first?.unsaved, "the background retry wrote it")
        let after = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(after, fingerprint(h.broker.accounts[alice]?.refreshToken ?? ""))
        XCTAssertNotEqual(after, fingerprint("refresh-0"))
    }

    func testARefusedOrImpossibleRevocationIsSaidAndTheSignInStands() async throws {
        // No revocation endpoint: said, with the key that gives one.
        let without = try await BrokerHarness()
        let none = try await signIn(without, refreshToken: "refresh-1")
        XCTAssertTrue(none.replacedSignIn?.contains("no revocation endpoint") == true, none.replacedSignIn ?? "nil")
        XCTAssertTrue(none.replacedSignIn?.contains("revocation_endpoint under [providers.corp]") == true, none.replacedSignIn ?? "nil")
        let h = try await BrokerHarness()
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        h.transport.refuseRevoking("refresh-0")
        let refused = try await signIn(h, refreshToken: "refresh-2")
        XCTAssertEqual(h.transport.revocations, [fingerprint("refresh-0")])
        XCTAssertTrue(refused.replacedSignIn?.contains("could not be revoked") == true, refused.replacedSignIn ?? "nil")
        XCTAssertEqual(h.broker.accounts[alice]?.refreshToken, "refresh-2", "a refused revocation costs the new sign-in nothing")
    }

    /// `revoke_replaced_sign_in = false`, for providers whose revocation ends every sign-in
    /// of the user at the client (Keycloak, Google): nothing sent, and the answer says it stays valid.
    func testTheProviderKeyTurnsItOff() async throws {
        let h = try await BrokerHarness(providerKeys: "revoke_replaced_sign_in = false")
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        let info = try await signIn(h, refreshToken: "refresh-new")
        XCTAssertEqual(h.transport.revocations, [])
        XCTAssertTrue(info.replacedSignIn?.contains("revoke_replaced_sign_in = false") == true, info.replacedSignIn ?? "nil")
        XCTAssertThrowsError(try BrokerHarness.config(providerKeys: "revoke_replaced_sign_in = 1")) {
            XCTAssertEqual(($0 as? ConfigError)?.key, "providers.corp.revoke_replaced_sign_in")
        }
    }

    /// A sign-in for one resource of a `refresh_tokens = "one-per-resource"` provider replaces
    /// that resource's refresh token only: that one is revoked, the account's stays.
    func testASignInForOneResourceRevokesThatResourcesOwnOnly() async throws {
        let h = try await BrokerHarness(providerKeys: #"refresh_tokens = "one-per-resource""#)
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        h.broker.accounts.update(alice) { $0.resourceRefreshTokens = ["https://api": "api-old"] }
        let info = try await signIn(h, refreshToken: "api-new", resource: "https://api")
        XCTAssertEqual(h.transport.revocations, [fingerprint("api-old")])
        XCTAssertEqual(h.broker.accounts[alice]?.refreshToken, "refresh-0")
        XCTAssertEqual(h.broker.accounts[alice]?.resourceRefreshTokens["https://api"], "api-new")
        XCTAssertNotNil(info.replacedSignIn)
    }

    /// The first sign-in of an account replaces nothing, and revokes nothing.
    func testAFirstSignInRevokesNothing() async throws {
        let h = try await BrokerHarness()
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        h.broker.accounts.remove(alice)
        let info = try await signIn(h, refreshToken: "refresh-first")
        XCTAssertNil(info.replacedSignIn)
        XCTAssertEqual(h.transport.revocations, [])
    }
}
