@testable import BrokerCore
import BrokerProtocol
import XCTest

/// The `scope` a token is served with (RFC 6749 §5.1, §3.3; RFC 8693 §2.2.1): the one the
/// provider's answer names, and when it names none, the scopes asked for, which is what an
/// answer without `scope` means. A provider that grants fewer than asked is said so in the
/// log. STUB provider: Glewlwyd ignores `scope` on a refresh and always names it.
final class ScopeAnswerTests: XCTestCase {
    private let asked = TokenGetParams(scopes: ["profile", "email"])

    func testAnAnswerWithoutScopeIsServedWithTheScopesAskedFor() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.json(#"{"access_token":"access-1","token_type":"Bearer","expires_in":3600}"#))
        let first = try await h.token(asked)
        XCTAssertEqual(first.scope, "email profile", "an answer without scope grants exactly the scopes asked for")
        let cached = try await h.token(asked)
        XCTAssertEqual(cached.scope, "email profile", "and the cached token says so too")
        // Asked without scopes: the sign-in's, which the answer does not name.
        let unnamed = try await h.token(TokenGetParams(resource: "https://api"))
        XCTAssertNil(unnamed.scope)
    }

    func testAnExchangeAnswerWithoutScopeIsServedWithTheScopesAskedFor() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.json(#"{"access_token":"access-1","token_type":"Bearer","expires_in":3600}"#))
        let exchanged = try await h.broker.exchange.exchangeToken(
            TokenExchangeParams(audience: "payroll", scopes: ["profile", "email"]))
        XCTAssertEqual(exchanged.scope, "email profile")
    }

    func testAnAnswerWithFewerScopesThanAskedIsServedWithItsOwnAndLogged() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.json(#"{"access_token":"access-1","token_type":"Bearer","expires_in":3600,"scope":"profile"}"#))
        let served = try await h.token(asked)
        XCTAssertEqual(served.scope, "profile", "the scope the provider granted, not the one asked for")
        let said = h.logs.matching("granted fewer scopes")
        XCTAssertEqual(said.count, 1, "the log does not say that email was not granted: \(h.logs.all)")
        XCTAssertTrue(said.first?.contains("email") == true, said.first ?? "")
        // A wider or equal answer is no news.
        h.transport.answerAlways(.json(#"{"access_token":"access-2","token_type":"Bearer","expires_in":3600,"scope":"openid profile email"}"#))
        _ = try await h.token(TokenGetParams(resource: "https://api", scopes: ["profile", "email"]))
        XCTAssertEqual(h.logs.matching("granted fewer scopes").count, 1)
    }
}
