@testable import BrokerServer
import BrokerProtocol
import Foundation
import XCTest

/// The memo's reading of an id (`AnswerMemo.written(id:)`) against the scanner's and the
/// writer's, over every id of up to three characters from the bytes that matter to JSON
/// numbers and strings, and longer ones at the edges: whenever the memo takes an id, the
/// line with it scans as a request with that id, the same line but for the id, and the
/// answer's beginning the full path writes for it is the memo's, byte for byte; and every
/// id the scanner reads, the memo takes.
final class AnswerMemoIDTests: XCTestCase {
    private static let before = #"{"jsonrpc":"2.0","id":"#
    private static let after = #","method":"token.get","params":{"resource":"https://api"}}"#

    private func check(_ id: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        let text = Array(Self.before.utf8) + id + Array(Self.after.utf8)
        let scanned = text.withUnsafeBytes { ScannedRequest.scan($0) }
        let written: [UInt8]? = id.withUnsafeBytes { AnswerMemo.written(id: $0).map { Array($0) } }
        let shown = String(decoding: id, as: UTF8.self)
        // And the other way: every id the scanner reads where it lies, the memo takes, so a
        // request the full path answers after the memo did not is never one it keeps already
        // (the memo does not look for one to replace).
        if let scanned, scanned.hasID, scanned.id != nil, scanned.idRange == Self.before.utf8.count..<(Self.before.utf8.count + id.count) {
            XCTAssertNotNil(written, "the scanner reads \(shown) as an id, which the memo does not take", file: file, line: line)
        }
        guard let written else { return }
        guard let scanned, scanned.hasID, let scannedID = scanned.id else {
            return XCTFail("the memo takes \(shown), which the scanner does not read as an id", file: file, line: line)
        }
        XCTAssertEqual(scanned.idRange, Self.before.utf8.count..<(Self.before.utf8.count + id.count), shown, file: file, line: line)
        XCTAssertEqual(scanned.method, "token.get", shown, file: file, line: line)
        var writer = ResponseWriter(capacity: 64)
        writer.head(scannedID)
        XCTAssertEqual(writer.bytes, Array(Self.before.utf8) + written, shown, file: file, line: line)
    }

    func testEveryShortIDTheMemoTakesIsReadAndWrittenAsTheFullPathDoes() {
        let alphabet: [UInt8] = Array("0159-+.eE\"\\ nul,:}]{[a/".utf8) + [0x7F, 0x1F, 0x09, 0xC3]
        var taken = 0
        for a in alphabet {
            check([a])
            for b in alphabet {
                check([a, b])
                for c in alphabet {
                    check([a, b, c])
                    if [a, b, c].withUnsafeBytes({ AnswerMemo.written(id: $0) }) != nil { taken += 1 }
                }
            }
        }
        XCTAssertGreaterThan(taken, 50, "the memo takes the usual ids")
    }

    func testLongIDsAtTheEdges() {
        for id in ["123456789012345678", "-123456789012345678", "1234567890123456789", "0123", "-0", "null", "nulls", "true",
                   #""a string id with spaces/and slashes""#, #""""#, #""a"b""#, #""a\"b""#, "1e5", "1.0", "--1", "-"] {
            check(Array(id.utf8))
        }
        // What the memo must take, and how it writes it.
        for (id, written) in [("-0", "0"), ("7", "7"), ("null", "null"), (#""x""#, #""x""#), ("-12", "-12")] {
            XCTAssertEqual(Array(id.utf8).withUnsafeBytes { AnswerMemo.written(id: $0).map { Array($0) } }, Array(written.utf8), id)
        }
        for id in ["1234567890123456789", "0123", "1.0", "1e5", #""a\"b""#, "nulls", "true", " 1", "1 "] {
            XCTAssertNil(Array(id.utf8).withUnsafeBytes { AnswerMemo.written(id: $0) }, id)
        }
    }
}
