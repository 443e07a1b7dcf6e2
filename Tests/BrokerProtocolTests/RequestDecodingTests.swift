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

    func testResultEncodingUsesWireNames() throws {
        let r = TokenGetResult(accessToken: "t", tokenType: "Bearer", expiresAt: 5, scope: nil, resource: "https://r", provider: "p", account: "a")
        let json = String(decoding: try JSONEncoder().encode(r), as: UTF8.self)
        XCTAssertTrue(json.contains(#""access_token":"t""#))
        XCTAssertTrue(json.contains(#""expires_at":5"#))
    }
}
