@testable import BrokerCore
import BrokerProtocol
@testable import BrokerServer
import Foundation
import XCTest

/// The bytes of a cache hit's answer: a token's need for JSON escaping is found once, when
/// it enters the cache, and the answer copies a token that needs none whole. Whatever the
/// token holds, the answer is the same JSON as before, and a token replaced in
/// the cache is answered as the new one at once.
final class CachedAnswerBytesTests: XCTestCase {
    private static let tokens = [
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln-_",
        "a \"quoted\" token",
        #"back\slash"#,
        "line\nfeed\r\ttab\u{1}\u{1F}",
        "ünïcödé/with/slashes",
        String(repeating: "x", count: 1021) + "\"",
        "",
    ]

    /// The answer as the daemon wrote it before the escaping was found at store time, built
    /// here by a JSON escaper of the test's own (RFC 8259 §7, `/` left as it is).
    private func encoded(_ id: RequestID, _ result: TokenGetResult) -> [UInt8] {
        func quoted(_ text: String) -> String {
            var out = "\""
            for u in text.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\r": out += "\\r"
                case "\t": out += "\\t"
                case "\u{8}": out += "\\b"
                case "\u{C}": out += "\\f"
                case _ where u.value < 0x20: out += String(format: "\\u%04x", u.value)
                default: out.unicodeScalars.append(u)
                }
            }
            return out + "\""
        }
        let idText = switch id {
        case .number(let n): String(n)
        case .string(let s): quoted(s)
        case .null: "null"
        }
        var members = [#""access_token":\#(quoted(result.accessToken))"#, #""token_type":\#(quoted(result.tokenType))"#,
                       #""expires_at":\#(result.expiresAt)"#]
        if let scope = result.scope { members.append(#""scope":\#(quoted(scope))"#) }
        if let resource = result.resource { members.append(#""resource":\#(quoted(resource))"#) }
        members += [#""provider":\#(quoted(result.provider))"#, #""account":\#(quoted(result.account))"#]
        return Array(#"{"jsonrpc":"2.0","id":\#(idText),"result":{\#(members.joined(separator: ","))}}"#.utf8)
    }

    private func answer(_ id: RequestID, _ result: TokenGetResult) -> [UInt8] {
        Array(RPCCodec().success(id, result))
    }

    private let key = CacheKey(account: AccountKey(provider: "corp", subject: "sub-alice"), resource: "https://api.example",
                               scopes: [], params: nil)

    private func served(_ cache: TokenCache, now: Double) throws -> TokenGetResult {
        let token = try XCTUnwrap(cache.lookup(key, now: now, minimumLife: 60))
        return TokenGetResult(cached: token, at: .both(now), resource: key.resource, provider: key.account.provider, account: "alice")
    }

    func testEveryTokenIsAnsweredAsTheSameJSON() throws {
        let cache = TokenCache()
        for (n, text) in Self.tokens.enumerated() {
            cache.store(CachedToken(accessToken: text, tokenType: "Bearer", expiresAt: 10_000, scope: "read \"all\""), for: key, now: 0)
            let result = try served(cache, now: 0)
            XCTAssertEqual(result.accessToken, text)
            for id in [RequestID.number(Int64(n)), .string("id \"\(n)\""), .null] {
                XCTAssertEqual(answer(id, result), encoded(id, result), "token \(n)")
            }
        }
    }

    func testATokenReplacedInTheCacheIsAnsweredAsTheNewOneAtOnce() throws {
        let cache = TokenCache()
        // Plain, then one that needs escaping, then plain again: each answer is the token then held.
        for text in [Self.tokens[0], Self.tokens[1], Self.tokens[0], Self.tokens[3], Self.tokens[5]] {
            cache.store(CachedToken(accessToken: text, tokenType: "Bearer", expiresAt: 10_000, scope: nil), for: key, now: 0)
            let result = try served(cache, now: 0)
            let bytes = answer(.number(1), result)
            XCTAssertEqual(bytes, encoded(.number(1), result))
            let decoded = try JSONDecoder().decode(Response<TokenGetResult>.self, from: Data(bytes))
            XCTAssertEqual(decoded.result.accessToken, text)
        }
    }

    func testNumbersAreWrittenAsBefore() {
        // The id and expires_at are written without making a String of them: the same digits.
        for n: Int64 in [0, 7, -1, 10, 99, 1_764_000_000, -1_764_000_000, Int64.max, Int64.min] {
            let result = TokenGetResult(accessToken: "t", tokenType: "Bearer", expiresAt: n, scope: nil, resource: "r",
                                        provider: "corp", account: "alice")
            XCTAssertEqual(String(decoding: answer(.number(n), result), as: UTF8.self),
                           String(decoding: encoded(.number(n), result), as: UTF8.self))
        }
    }

    func testAResultMadeElsewhereIsEscapedAsBefore() throws {
        // A result not from the cache (a refresh's, a client's) knows nothing of its token: escaped in full.
        for text in Self.tokens {
            let result = TokenGetResult(accessToken: text, tokenType: "Bearer", expiresAt: 1, scope: nil, resource: nil,
                                        provider: "corp", account: "alice")
            XCTAssertEqual(answer(.number(7), result), encoded(.number(7), result))
        }
    }
}
