import BrokerProtocol
import Foundation
import XCTest

/// The package's one JSON value type and one string escaper (docs/architecture.md).
final class JSONLayerTests: XCTestCase {
    /// `account.whoami`'s result as docs/protocol.md shows it: whole numbers as integers,
    /// other numbers as numbers, every JSON kind kept.
    func testClaimsKeepTheirWireForm() throws {
        let result = ClaimsResult(provider: "p", subject: "s", claims: [
            "exp": .number(1_700_000_000), "ratio": .number(0.5), "name": .string("Ann"),
            "email_verified": .bool(true), "nick": .null,
            "groups": .array([.string("a"), .number(2)]), "address": .object(["country": .string("DE")]),
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(result), as: UTF8.self)
        XCTAssertEqual(json, #"{"claims":{"address":{"country":"DE"},"email_verified":true,"exp":1700000000,"groups":["a",2],"name":"Ann","nick":null,"ratio":0.5},"provider":"p","subject":"s"}"#)
        XCTAssertEqual(try JSONDecoder().decode(ClaimsResult.self, from: Data(json.utf8)), result)
    }

    func testProviderNumbersGivenAsTextAreWholeNumbers() throws {
        let answer = try JSONDecoder().decode([String: JSONValue].self, from: Data(#"{"a":"3600","b":3600,"c":1.5,"d":"1h"}"#.utf8))
        XCTAssertEqual(answer["a"]?.integerValue, 3600)
        XCTAssertEqual(answer["b"]?.integerValue, 3600)
        XCTAssertNil(answer["c"]?.integerValue)
        XCTAssertNil(answer["d"]?.integerValue)
    }

    /// The escaper writes what JSONDecoder reads back as the same text, for every kind of
    /// byte: plain runs longer than the 8-byte step, quotes, backslashes, controls, UTF-8.
    func testEscapedStringsReadBackAsTheyWere() throws {
        let texts = ["", "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.sig", #"a"b\c"#, "tab\there\nnew\r\u{8}\u{c}\u{1}\u{1f}",
                     "ünïcödé ✓ 😀", String(repeating: "x", count: 17) + "\"", "/slash/"]
        for text in texts {
            let quoted = JSONString.quoted(text)
            XCTAssertEqual(try JSONDecoder().decode(String.self, from: Data(quoted.utf8)), text)
            var bytes: [UInt8] = []
            JSONString.append(text, to: &bytes)
            XCTAssertEqual(String(decoding: bytes, as: UTF8.self), quoted)
        }
        XCTAssertEqual(JSONString.quoted("a\"b\\c\n\u{1}/"), #""a\"b\\c\n\u0001/""#)
    }

    func testOnlyQuoteBackslashAndControlsNeedEscaping() {
        func needs(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { JSONString.needsEscaping($0) } }
        XCTAssertFalse(needs("plain-token_with.dots/and~ünïcode-and-more-than-eight-bytes"))
        for special in ["\"", "\\", "\n", "\u{0}", "\u{1f}"] {
            XCTAssertTrue(needs(special), "short")
            XCTAssertTrue(needs("0123456789" + special + "0123456789"), "in a word")
        }
    }
}
