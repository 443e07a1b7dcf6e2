@testable import BrokerServer
import BrokerProtocol
import Foundation
import XCTest

/// The one-pass request scanner on lines with many members: it reads what requests hold,
/// and hands a line with thousands of members to JSONDecoder instead of comparing every
/// member with every other on the event loop.
final class RequestScannerTests: XCTestCase {
    private func scan(_ line: String) -> ScannedRequest? {
        Array(line.utf8).withUnsafeBytes { ScannedRequest.scan($0) }
    }

    /// A token.get line padded with `count` distinct members in `where` ("top" or "params").
    private func padded(_ count: Int, in place: String) -> String {
        let members = (0..<count).map { "\"m\($0)\":0" }.joined(separator: ",")
        if place == "top" {
            return #"{"jsonrpc":"2.0","id":7,"method":"token.get","params":{"resource":"https://api"},"# + members + "}"
        }
        return #"{"jsonrpc":"2.0","id":7,"method":"token.get","params":{"resource":"https://api","# + members + "}}"
    }

    func testARequestIsReadInOnePass() throws {
        let request = try XCTUnwrap(scan(#"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"resource":"https://api","scopes":["a"]}}"#))
        XCTAssertEqual(request.method, "token.get")
        XCTAssertEqual(request.id, .number(1))
        XCTAssertEqual(request.param("resource"), .string("https://api"))
    }

    func testDuplicateMembersGoToTheSlowPath() {
        XCTAssertNil(scan(#"{"jsonrpc":"2.0","id":1,"id":2,"method":"token.get"}"#))
        XCTAssertNil(scan(#"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"resource":"a","resource":"b"}}"#))
        XCTAssertNil(scan(#"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"x":{"k":1,"k":2}}}"#))
    }

    func testLinesWithManyMembersGoToJSONDecoder() throws {
        // Up to the cap the scanner reads the line; past it, JSONDecoder does, with the same result.
        let few = ScannedRequest.maximumMembers - 5
        XCTAssertEqual(scan(padded(few, in: "top"))?.method, "token.get")
        XCTAssertEqual(scan(padded(few, in: "params"))?.param("resource"), .string("https://api"))
        let nestedFew = #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"x":{"# + (0..<few).map { "\"k\($0)\":0" }.joined(separator: ",") + "}}}"
        XCTAssertNotNil(scan(nestedFew))

        for place in ["top", "params"] {
            let line = padded(6_400, in: place)
            XCTAssertLessThan(line.utf8.count, 64 * 1024, "fits the line cap")
            let clock = ContinuousClock()
            var scanned: ScannedRequest?
            let scanTime = clock.measure { scanned = scan(line) }
            XCTAssertNil(scanned, "\(place): a line with 6 400 members goes to JSONDecoder")
            var header: RequestHeader?
            var params: RequestParams<TokenGetParams>?
            let decodeTime = clock.measure {
                header = try? JSONDecoder().decode(RequestHeader.self, from: Data(line.utf8))
                params = try? JSONDecoder().decode(RequestParams<TokenGetParams>.self, from: Data(line.utf8))
            }
            XCTAssertEqual(header?.method, "token.get", place)
            XCTAssertEqual(header?.id, .number(7), place)
            XCTAssertEqual(params?.params?.resource, "https://api", place)
            print("\(place): \(line.utf8.count) bytes, 6 400 members: scanner gave up after \(scanTime), JSONDecoder read it in \(decodeTime)")
        }
        let nested = #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"x":{"# + (0..<6_400).map { "\"k\($0)\":0" }.joined(separator: ",") + "}}}"
        XCTAssertNil(scan(nested))
    }
}

/// `wait_for_sign_in` is read by the scanner as JSONDecoder reads it; a value of another
/// type sends the request to JSONDecoder and its error.
final class WaitForSignInScanTests: XCTestCase {
    private func params(_ line: String) -> TokenGetParams? {
        Array(line.utf8).withUnsafeBytes { ScannedRequest.scan($0) }.flatMap { TokenGetParams(scanned: $0) }
    }

    func testTheScannerReadsWaitForSignIn() {
        let line = #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"resource":"https://api","wait_for_sign_in":120}}"#
        XCTAssertEqual(params(line), TokenGetParams(resource: "https://api", waitForSignIn: 120))
        XCTAssertEqual(params(line), try? JSONDecoder().decode(RequestParams<TokenGetParams>.self, from: Data(line.utf8)).params)
        XCTAssertNil(params(#"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"wait_for_sign_in":"60"}}"#))
        XCTAssertEqual(params(#"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"wait_for_sign_in":null}}"#), TokenGetParams())
    }
}
