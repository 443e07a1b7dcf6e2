import BrokerProtocol
import Foundation
import XCTest

final class RequestDecodingTests: XCTestCase {
    func testIDForms() throws {
        let d = JSONDecoder()
        XCTAssertEqual(try d.decode(RequestHeader.self, from: Data(#"{"jsonrpc":"2.0","id":7,"method":"x"}"#.utf8)).id, .number(7))
        XCTAssertEqual(try d.decode(RequestHeader.self, from: Data(#"{"jsonrpc":"2.0","id":"a","method":"x"}"#.utf8)).id, .string("a"))
        let null = try d.decode(RequestHeader.self, from: Data(#"{"jsonrpc":"2.0","id":null,"method":"x"}"#.utf8))
        XCTAssertEqual(null.id, .null)
        XCTAssertTrue(null.hasID)
        let note = try d.decode(RequestHeader.self, from: Data(#"{"jsonrpc":"2.0","method":"x"}"#.utf8))
        XCTAssertFalse(note.hasID)
    }

    func testTokenParamsSnakeCase() throws {
        let p = try JSONDecoder().decode(RequestParams<TokenGetParams>.self, from: Data(#"{"params":{"resource":"https://r","min_ttl":30,"scopes":["a"]}}"#.utf8)).params
        XCTAssertEqual(p, TokenGetParams(resource: "https://r", scopes: ["a"], minTTL: 30))
    }

    /// `token.exchange` and `token.reject` share `token.get`'s key members; each keeps the
    /// wire names docs/protocol.md gives it, both ways.
    func testExchangeAndRejectParamsKeepTheirWireForm() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let exchange = TokenExchangeParams(audience: "svc", resource: "https://r", scopes: ["a"], provider: "p", account: "u",
                                           subjectTokenType: "id_token", requestedTokenType: "jwt", minTTL: 30)
        let exchangeJSON = #"{"account":"u","audience":"svc","min_ttl":30,"provider":"p","requested_token_type":"jwt","resource":"https:\/\/r","scopes":["a"],"subject_token_type":"id_token"}"#
        XCTAssertEqual(String(decoding: try encoder.encode(exchange), as: UTF8.self), exchangeJSON)
        XCTAssertEqual(try JSONDecoder().decode(TokenExchangeParams.self, from: Data(exchangeJSON.utf8)), exchange)
        XCTAssertEqual(String(decoding: try encoder.encode(TokenExchangeParams(audience: "svc")), as: UTF8.self), #"{"audience":"svc"}"#)

        let reject = TokenRejectParams(accessToken: "t", resource: "https://r", scopes: ["a"], provider: "p", account: "u")
        let rejectJSON = #"{"access_token":"t","account":"u","provider":"p","resource":"https:\/\/r","scopes":["a"]}"#
        XCTAssertEqual(String(decoding: try encoder.encode(reject), as: UTF8.self), rejectJSON)
        XCTAssertEqual(try JSONDecoder().decode(TokenRejectParams.self, from: Data(rejectJSON.utf8)), reject)
        XCTAssertEqual(TokenRejectParams(key: TokenGetParams(resource: "https://r", scopes: ["a"], provider: "p", account: "u", minTTL: 30)),
                       TokenRejectParams(resource: "https://r", scopes: ["a"], provider: "p", account: "u"))
    }

    func testResultEncodingUsesWireNames() throws {
        let r = TokenGetResult(accessToken: "t", tokenType: "Bearer", expiresAt: 5, scope: nil, resource: "https://r", provider: "p", account: "a")
        let json = String(decoding: try JSONEncoder().encode(r), as: UTF8.self)
        XCTAssertTrue(json.contains(#""access_token":"t""#))
        XCTAssertTrue(json.contains(#""expires_at":5"#))
    }
}
