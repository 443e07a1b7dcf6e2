@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import JWSTestSupport
import XCTest

/// `token.exchange` with `subject_token_type = id_token`: the provider is never sent an ID
/// token that has expired. The account is refreshed first, which brings a new one from
/// providers that send one with a refresh (OIDC Core §12.2); without one, a sentence says
/// to sign in again. STUB provider: Glewlwyd offers no token exchange (docs/protocol.md).
final class ExchangeIDTokenTests: XCTestCase {
    private var directory: URL?

    override func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    private let byIDToken = TokenExchangeParams(audience: "payroll", subjectTokenType: "id_token")

    func testAnExpiredIDTokenIsRenewedByARefreshBeforeItIsExchanged() async throws {
        let directory = try OpenSSLTool.temporaryDirectory()
        self.directory = directory
        let key = try TestKey.generate(.p256, in: directory)
        let h = try await BrokerHarness()
        try h.transport.publish([key.jwk(kid: "k1", alg: "ES256")])

        func idToken() throws -> String {
            let now = Int(h.clock.now)
            let claims = #"{"iss":"\#(StubTransport.issuer)","aud":"authbroker","sub":"sub-alice","iat":\#(now),"exp":\#(now + 300)}"#
            return try TestJWS.compact(header: #"{"alg":"ES256","kid":"k1"}"#, payload: claims) { try key.sign($0, .es256) }
        }

        let first = try idToken()
        h.transport.attachIDTokens(first)
        _ = try await h.token()
        h.clock.advance(600)  // the ID token has expired; the access token lives on
        let renewed = try idToken()
        h.transport.attachIDTokens(renewed)
        _ = try await h.broker.exchange.exchangeToken(byIDToken)

        let sent = h.transport.tokenRequests.compactMap { $0["subject_token"] }.map(fingerprint)
        XCTAssertEqual(sent, [fingerprint(renewed)], "the provider was sent an expired ID token to exchange")
    }

    func testWithoutARenewedIDTokenTheExchangeSaysToSignInAgain() async throws {
        let h = try await BrokerHarness()
        let now = Int(h.clock.now)
        let expired = #"{"alg":"none"}"#.utf8.base64URL + "." + #"{"sub":"sub-alice","iat":\#(now - 600),"exp":\#(now - 300)}"#.utf8.base64URL + "."
        h.broker.accounts.update(AccountKey(provider: "corp", subject: "sub-alice")) { $0.idToken = expired }
        do {
            let result = try await h.broker.exchange.exchangeToken(byIDToken)
            XCTFail("an expired ID token was exchanged for \(fingerprint(result.accessToken))")
        } catch {
            XCTAssertTrue(error.message.contains("authctl login --provider corp"), error.message)
        }
        XCTAssertEqual(h.transport.tokenRequests.compactMap { $0["subject_token"] }.map(fingerprint), [], "the expired ID token was sent")
    }
}

private extension String.UTF8View {
    var base64URL: String { Base64URL.encode(Array(self)) }
}
