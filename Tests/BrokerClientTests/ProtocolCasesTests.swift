@testable import BrokerClient
import BrokerProtocol
import Foundation
import Glibc
import XCTest

/// The shared protocol cases (clients/protocol-cases.json) that clients/python and
/// clients/go play too, so the three clients answer every case alike.
///
/// Each case is played by a STUB daemon (a Unix socket served by this test on a thread): a
/// real daemon does not answer a chosen error, a blank line or garbage on demand. The
/// file's daemon answers are checked against the real daemon by
/// Tests/IntegrationTests/test_protocol_cases.py.
final class ProtocolCasesTests: XCTestCase {
    private struct Case: Decodable {
        struct Call: Decodable {
            var method: String
            var params: JSONValue
        }
        var name: String
        var call: Call
        var replies: [JSONValue]
        var close: Bool?
        var expect: [String: JSONValue]
    }

    private struct File: Decodable { var cases: [Case] }

    private static func cases() throws -> [Case] {
        let file = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("clients/protocol-cases.json")
        let cases = try JSONDecoder().decode(File.self, from: Data(contentsOf: file)).cases
        XCTAssertFalse(cases.isEmpty)
        return cases
    }

    /// A STUB daemon for one case: serves one connection, hands back the request line it read.
    private final class Stub: @unchecked Sendable {
        let path: String
        private let fd: Int32
        private let done = DispatchSemaphore(value: 0)
        private var requestLine: [UInt8] = []

        init(_ c: Case) throws {
            path = "/tmp/ab-swift-case-\(UUID().uuidString.prefix(8))"
            fd = listeningSocket(at: path, backlog: 1)
            let replies = c.replies
            let closeAfter = c.close ?? false
            Thread { [self] in serve(replies, closeAfter) }.start()
        }

        private func serve(_ replies: [JSONValue], _ closeAfter: Bool) {
            defer { done.signal() }
            let peer = accept(fd, nil, nil)
            guard peer >= 0 else { return }
            defer { close(peer) }
            var byte: UInt8 = 0
            while read(peer, &byte, 1) == 1 && byte != UInt8(ascii: "\n") { requestLine.append(byte) }
            let id = (try? JSONDecoder().decode([String: JSONValue].self, from: Data(requestLine)))?["id"] ?? .null
            for reply in replies {
                var line: [UInt8]
                if case .string(let raw) = reply {
                    line = Array(raw.utf8)
                } else {
                    line = Array((try? JSONEncoder().encode(Self.fill(reply, id))) ?? Data())
                }
                line.append(UInt8(ascii: "\n"))
                _ = line.withUnsafeBytes { write(peer, $0.baseAddress, $0.count) }
            }
            if closeAfter { return }
            var sink = [UInt8](repeating: 0, count: 4096)
            while read(peer, &sink, sink.count) > 0 {}
        }

        static func fill(_ value: JSONValue, _ id: JSONValue) -> JSONValue {
            switch value {
            case .string("$id"): return id
            case .object(let members): return .object(members.mapValues { fill($0, id) })
            case .array(let items): return .array(items.map { fill($0, id) })
            default: return value
            }
        }

        /// The request the client sent, once the connection is over.
        func request() -> [String: JSONValue] {
            done.wait()
            return (try? JSONDecoder().decode([String: JSONValue].self, from: Data(requestLine))) ?? [:]
        }

        deinit {
            close(fd)
            unlink(path)
        }
    }

    private func check(_ c: Case, _ stub: Stub) {
        let request = stub.request()
        XCTAssertEqual(request["jsonrpc"], .string("2.0"), c.name)
        XCTAssertEqual(request["method"], .string(c.call.method), c.name)
        guard case .number? = request["id"] else { return XCTFail("\(c.name): the id is not a number") }
        XCTAssertEqual(request["params"] ?? .object([:]), c.call.params, c.name)
    }

    private func check(_ c: Case, thrown error: any Error) throws {
        if let expected = c.expect["error"] {
            let want = try JSONDecoder().decode(RPCError.self, from: JSONEncoder().encode(expected))
            XCTAssertEqual(error as? ClientError, .rpc(want), c.name)
        } else if case .string(let failure)? = c.expect["failure"] {
            switch (failure, error as? ClientError) {
            case ("bad_response", .badResponse?), ("connection_lost", .io?): break
            default: XCTFail("\(c.name): want \(failure), got \(error)")
            }
            XCTAssertFalse("\(error)".contains("eyJ"), c.name)
        } else {
            XCTFail("\(c.name): want a result, got \(error)")
        }
    }

    func testEveryCaseWithTheGenericCall() throws {
        var played = 0
        for c in try Self.cases() {
            // The Swift client calls the methods it knows (RPCMethod) only.
            guard let method = RPCMethod(rawValue: c.call.method) else { continue }
            let stub = try Stub(c)
            let connection = try BrokerConnection(path: stub.path, callTimeout: .seconds(10))
            do {
                let result = try connection.call(method, c.call.params, as: JSONValue.self)
                XCTAssertEqual(result, c.expect["result"], c.name)
            } catch {
                try check(c, thrown: error)
            }
            connection.close()
            check(c, stub)
            played += 1
        }
        XCTAssertGreaterThan(played, 20)
    }

    func testTheTokenCasesWithTheTypedTokenCall() throws {
        for c in try Self.cases() where c.call.method == "token.get" {
            let params = try JSONDecoder().decode(TokenGetParams.self, from: JSONEncoder().encode(c.call.params))
            let stub = try Stub(c)
            let connection = try BrokerConnection(path: stub.path, callTimeout: .seconds(10))
            do {
                let token = try connection.token(params)
                guard case .object(let want)? = c.expect["result"] else { throw XCTSkip("unreachable") }
                XCTAssertEqual(.string(token.accessToken), want["access_token"], c.name)
                XCTAssertEqual(.string(token.tokenType), want["token_type"], c.name)
                XCTAssertEqual(.number(Double(token.expiresAt)), want["expires_at"], c.name)
                XCTAssertEqual(token.scope.map(JSONValue.string) ?? .null, want["scope"] ?? .null, c.name)
                XCTAssertEqual(token.resource.map(JSONValue.string) ?? .null, want["resource"] ?? .null, c.name)
                XCTAssertEqual(.string(token.provider), want["provider"], c.name)
                XCTAssertEqual(.string(token.account), want["account"], c.name)
            } catch {
                try check(c, thrown: error)
            }
            connection.close()
            check(c, stub)
        }
    }
}
