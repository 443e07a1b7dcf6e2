@testable import BrokerCore
import BrokerProtocol
import Foundation
@testable import BrokerServer
import Logging
import NIOCore
import OAuth
import SecretStore
import XCTest

/// A closed set of strings in a request (`login.start`'s `flow`) is checked where the params
/// are read: a value outside it is -32602 naming the member and the choices, never echoing
/// what was sent.
final class WireValueTests: XCTestCase {
    /// The daemon's own method table over a real broker (memory store, one provider; no
    /// request reaches the provider: its STUB transport cannot be reached).
    private func daemonTable() throws -> MethodTable {
        MethodTable.broker(try testBroker("""
            [daemon]
            store = "memory"

            [providers.corp]
            issuer = "https://idp.invalid"
            client_id = "authbroker"
            """))
    }

    private func answer(_ table: MethodTable, _ line: String) async throws -> [String: Any] {
        let handler = try XCTUnwrap(table[RPCMethod.loginStart.rawValue])
        var bytes = ByteBuffer()
        bytes.writeString(line)
        let data: Data
        switch handler(RequestLine(scanned: nil, bytes: bytes), .number(1), RPCCodec(), { _ throws(BrokerError) in nil }, nil) {
        case .now(let d), .subscription(_, let d): data = d
        case .later(let work), .untilClosed(let work): data = await work()
        }
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    func testAnUnknownFlowIsInvalidParamsNamingTheMemberNotEchoingIt() async throws {
        let table = try daemonTable()
        let sent = "passkey-zq81"
        let object = try await answer(table, #"{"jsonrpc":"2.0","id":1,"method":"login.start","params":{"provider":"corp","flow":"\#(sent)"}}"#)
        let error = try XCTUnwrap(object["error"] as? [String: Any])
        XCTAssertEqual(error["code"] as? Int, -32602)
        let message = try XCTUnwrap(error["message"] as? String)
        XCTAssertTrue(message.contains("flow"), message)
        for choice in ["browser", "device", "terminal"] { XCTAssertTrue(message.contains(choice), message) }
        XCTAssertFalse(message.contains(sent), "the value sent is not echoed: \(message)")
    }
}
