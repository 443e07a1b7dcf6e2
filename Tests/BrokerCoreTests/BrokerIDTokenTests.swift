@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import JWSTestSupport
import XCTest

/// An ID token that comes with a refresh is verified like any other, at the broker's (moved)
/// time; one that fails is not kept, and the access token is still served.
final class BrokerIDTokenTests: XCTestCase {
    private var directory: URL?

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    func testAnIDTokenWithARefreshIsKeptOnlyWhenItVerifies() async throws {
        let directory = try OpenSSLTool.temporaryDirectory()
        self.directory = directory
        let key = try TestKey.generate(.p256, in: directory)
        let stranger = try TestKey.generate(.p256, in: directory)
        let h = try await BrokerHarness()
        try h.transport.publish([key.jwk(kid: "k1", alg: "ES256")])
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))

        /// An ID token for the provider's client, issued now by the test's clock.
        func idToken(name: String, subject: String = "sub-alice", life: Double = 300, signer: TestKey? = nil) throws -> String {
            let now = Int(h.clock.now)
            let claims = #"{"iss":"\#(StubTransport.issuer)","aud":"authbroker","sub":"\#(subject)","iat":\#(now),"exp":\#(now + Int(life)),"name":"\#(name)"}"#
            return try TestJWS.compact(header: #"{"alg":"ES256","kid":"k1"}"#, payload: claims) { try (signer ?? key).sign($0, .es256) }
        }
        func shownName() throws -> JSONValue? { try h.broker.claims.whoami(AccountParams()).claims["name"] }

        h.transport.attachIDTokens(try idToken(name: "Alice One"))
        _ = try await h.token()
        XCTAssertEqual(try shownName(), .string("Alice One"))

        let refused: [(String, () throws -> String)] = [
            ("expired at the broker's time", { try idToken(name: "Expired", life: -3600) }),
            ("about another subject", { try idToken(name: "Mallory", subject: "sub-mallory") }),
            ("signed by a key the provider does not publish", { try idToken(name: "Forged", signer: stranger) }),
        ]
        for (why, make) in refused {
            h.clock.advance(3600)
            h.transport.attachIDTokens(try make())
            let served = try await h.token()
            XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-\(h.transport.tokenRequests.count)"), why)
            XCTAssertEqual(try shownName(), .string("Alice One"), "an ID token \(why) is not kept")
        }

        h.clock.advance(3600)
        h.transport.attachIDTokens(try idToken(name: "Alice Two"))
        _ = try await h.token()
        XCTAssertEqual(try shownName(), .string("Alice Two"))
    }

    /// A provider that does not rotate refresh tokens sends a new ID token with a refresh
    /// all the same: it is kept (and stored), as with a rotated refresh token.
    func testAnIDTokenWithARefreshIsKeptWithoutARotatedRefreshToken() async throws {
        let directory = try OpenSSLTool.temporaryDirectory()
        self.directory = directory
        let key = try TestKey.generate(.p256, in: directory)
        let h = try await BrokerHarness()
        try h.transport.publish([key.jwk(kid: "k1", alg: "ES256")])
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: false))
        let now = Int(h.clock.now)
        let claims = #"{"iss":"\#(StubTransport.issuer)","aud":"authbroker","sub":"sub-alice","iat":\#(now),"exp":\#(now + 300),"name":"Alice One"}"#
        h.transport.attachIDTokens(try TestJWS.compact(header: #"{"alg":"ES256","kid":"k1"}"#, payload: claims) { try key.sign($0, .es256) })
        _ = try await h.token()
        XCTAssertEqual(try h.broker.claims.whoami(AccountParams()).claims["name"], .string("Alice One"))
        let stored = try await h.store.storedAccount(subject: "sub-alice")
        XCTAssertNotNil(stored?.idToken, "the new ID token is stored for after a restart")
    }
}
