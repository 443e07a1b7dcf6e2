@testable import BrokerClient
import BrokerProtocol
import Foundation
import XCTest

/// The Codable-free token.get path of the client: it must read exactly what JSONDecoder
/// reads, and hand anything else to JSONDecoder (nil).
final class TokenWireTests: XCTestCase {
    func testTheRequestDecodesToTheSameParams() throws {
        let params = TokenGetParams(resource: "https://api.example/\"q\"\\x\n", scopes: ["openid", "é"], provider: "corp", account: "a\u{1}b", minTTL: 300, params: ["organization_id": "o\"1", "claims": "{\"a\":1}"], waitForSignIn: 120)
        let line = TokenWire.request(id: 7, params)
        let request = try JSONDecoder().decode(DecodedRequest.self, from: Data(line))
        XCTAssertEqual(request.jsonrpc, "2.0")
        XCTAssertEqual(request.id, .number(7))
        XCTAssertEqual(request.method, RPCMethod.tokenGet.rawValue)
        XCTAssertEqual(request.params, params)
        XCTAssertEqual(String(decoding: TokenWire.request(id: 1, TokenGetParams()), as: UTF8.self),
                       #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{}}"#)
    }

    func testASuccessfulAnswerIsReadAsJSONDecoderReadsIt() throws {
        let expected = TokenGetResult(accessToken: "eyJ.a\"b\\c/é😀", tokenType: "Bearer", expiresAt: 1_900_000_000,
                                      scope: "openid profile", resource: nil, provider: "corp", account: "alice")
        let encoded = try JSONEncoder().encode(Response(id: .number(3), result: expected))
        XCTAssertEqual(TokenWire.result(ArraySlice(encoded), id: 3), expected)
        let escaped = #"{"jsonrpc":"2.0","id":3,"result":{"access_token":"\u0041\ud83d\ude00\/","token_type":"Bearer","expires_at":5,"resource":null,"provider":"p","account":"a"}}"#
        XCTAssertEqual(TokenWire.result(ArraySlice(escaped.utf8), id: 3)?.accessToken, "A😀/")
    }

    func testAnythingElseIsLeftToJSONDecoder() {
        let ok = #"{"jsonrpc":"2.0","id":3,"result":{"access_token":"t","token_type":"Bearer","expires_at":5,"provider":"p","account":"a"}}"#
        XCTAssertNotNil(TokenWire.result(ArraySlice(ok.utf8), id: 3))
        let others = [
            ok.replacingOccurrences(of: #""id":3"#, with: #""id":2"#),                        // someone else's answer
            ok.replacingOccurrences(of: #""expires_at":5"#, with: #""expires_at":5.5"#),      // not an integer
            ok.replacingOccurrences(of: #""expires_at":5"#, with: #""expires_at":05"#),       // not JSON
            ok.replacingOccurrences(of: #""account":"a""#, with: #""account":1"#),            // wrong type
            ok.replacingOccurrences(of: #","provider":"p""#, with: ""),                       // missing member
            ok.replacingOccurrences(of: #""t""#, with: "\"t\u{1}\""),                         // raw control character
            ok.replacingOccurrences(of: #""t""#, with: #""\ud800""#),                         // lone surrogate
            ok.replacingOccurrences(of: #""t""#, with: #""\q""#),                             // unknown escape
            ok + "x",                                                                           // trailing garbage
            String(ok.dropLast()),                                                              // cut short
            #"{"jsonrpc":"2.0","id":3,"error":{"code":-32001,"message":"sign in"}}"#,
            #"{"jsonrpc":"2.0","id":3,"result":{"access_token":"t","token_type":"Bearer","expires_at":5,"provider":"p","account":"a"},"error":{"code":1,"message":"m"}}"#,
            String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
            "",
        ]
        for line in others {
            XCTAssertNil(TokenWire.result(ArraySlice(line.utf8), id: 3), line)
        }
        XCTAssertNil(TokenWire.result([0x22, 0xFF, 0x22][...], id: 3))
    }

    /// Strings are validated as UTF-8 whether or not they hold escapes; ASCII takes the
    /// non-generic path (LightJSON.Reader.text), anything else the standard library's check.
    func testTheReaderKeepsValidUTF8AndRefusesInvalid() {
        XCTAssertEqual(LightJSON.parse(Array(#""plain-ASCII_token.~+/=""#.utf8)), .string("plain-ASCII_token.~+/="))
        XCTAssertEqual(LightJSON.parse(Array(#""Zoë 😀 東京""#.utf8)), .string("Zoë 😀 東京"))
        XCTAssertEqual(LightJSON.parse(Array(#""Zoë\n😀""#.utf8)), .string("Zoë\n😀"))
        let invalid: [[UInt8]] = [[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80], [0x80]]
        for bytes in invalid {
            XCTAssertNil(LightJSON.parse([0x22] + bytes + [0x22]), "\(bytes)")
            XCTAssertNil(LightJSON.parse([0x22, 0x61] + bytes + Array(#"\n""#.utf8)), "escaped, \(bytes)")
        }
    }

    /// Any bytes between quotes (but a quote, a backslash or a control character) are read
    /// exactly as the standard library's validation reads them: the same string, or nil.
    func testTheReaderAgreesWithTheStandardLibrarysUTF8Check() {
        // A fixed linear congruential sequence: the same 3 000 cases every run.
        var state: UInt64 = 25
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        let pieces: [[UInt8]] = [[0x61], [0x7E], [0xC3, 0xA9], [0xE6, 0x9D, 0xB1], [0xF0, 0x9F, 0x98, 0x80], [0x80], [0xBF],
                                 [0xC0], [0xC1, 0x81], [0xE0, 0x80], [0xED, 0xBF, 0xBF], [0xF4, 0x8F], [0xF5], [0xFF]]
        for _ in 0..<3000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(next() % 6) { bytes += pieces[Int(next() % UInt64(pieces.count))] }
            let expected = String(validating: bytes, as: UTF8.self).map { LightJSON.string($0) }
            XCTAssertEqual(LightJSON.parse([0x22] + bytes + [0x22]), expected, "\(bytes)")
        }
    }

    func testTheReaderAcceptsJSONsValueKinds() {
        let text = #" { "a" : [1, -0, 2.5e3, true, false, null, "x", {}, []] , "b":{"c":"d"} } "#
        let value = LightJSON.parse(Array(text.utf8))
        guard case .array(let items)? = value?["a"] else { return XCTFail("no array") }
        XCTAssertEqual(items.count, 9)
        XCTAssertEqual(items[0], .integer(1))
        XCTAssertEqual(items[3], .bool(true))
        XCTAssertEqual(items[5], .null)
        XCTAssertEqual(value?["b"]?["c"]?.string, "d")
        XCTAssertNil(LightJSON.parse(Array("{\"a\":1,}".utf8)))
        XCTAssertNil(LightJSON.parse(Array("[1 2]".utf8)))
        XCTAssertNil(LightJSON.parse(Array("-".utf8)))
        XCTAssertNil(LightJSON.parse(Array("1.".utf8)))
    }
}

private struct Response<R: Encodable>: Encodable {
    var jsonrpc = "2.0"
    var id: RequestID
    var result: R
}

private struct DecodedRequest: Decodable {
    var jsonrpc: String
    var id: RequestID
    var method: String
    var params: TokenGetParams
}
