import BrokerProtocol
import Foundation
import XCTest

/// The closed sets of strings in the messages keep the wire form docs/protocol.md gives
/// them, both ways; an answer with a value this build does not know still decodes whole.
final class WireEnumTests: XCTestCase {
    private let encoder = JSONEncoder()

    private func wire<T: WireEnum>(_ value: T) throws -> String {
        String(decoding: try encoder.encode([value]), as: UTF8.self)
    }

    /// docs/protocol.md, where each value is written as `value`.
    private func protocolDoc() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
    }

    private func check<T: WireEnum>(_ type: T.Type, _ expected: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(T.known.map(\.rawValue), expected, "the values and their order", file: file, line: line)
        let doc = try protocolDoc()
        for (value, raw) in zip(T.known, expected) {
            XCTAssertEqual(try wire(value), "[\"\(raw)\"]", file: file, line: line)
            XCTAssertEqual(try JSONDecoder().decode([T].self, from: Data("[\"\(raw)\"]".utf8)), [value], file: file, line: line)
            XCTAssertTrue(doc.contains("`\(raw)`"), "docs/protocol.md names `\(raw)`", file: file, line: line)
        }
    }

    func testTheWireStringsAreThoseOfTheProtocol() throws {
        try check(LoginFlow.self, ["browser", "device", "terminal"])
        try check(AccountState.self, ["ready", "login_required"])
        try check(LoginPrompt.Kind.self, ["text", "secret", "otp"])
    }

    func testAnAnswerWithAValueOfANewerDaemonStillDecodes() throws {
        let list = #"{"accounts":[{"provider":"corp","subject":"s","state":"suspended"},{"provider":"corp","subject":"t","state":"ready"}]}"#
        let accounts = try JSONDecoder().decode(AccountListResult.self, from: Data(list.utf8)).accounts
        XCTAssertEqual(accounts.map(\.state), [.unknown("suspended"), .ready])
        XCTAssertFalse(accounts[0].state.isKnown)
        XCTAssertEqual(try wire(accounts[0].state), #"["suspended"]"#, "kept as sent")

        let started = #"{"login_id":"l","provider":"corp","flow":"passkey","expires_at":5}"#
        XCTAssertEqual(try JSONDecoder().decode(LoginStartResult.self, from: Data(started.utf8)).flow, .unknown("passkey"))
        let prompt = #"{"prompt":{"kind":"choice","label":"Pick","name":"pick"}}"#
        XCTAssertEqual(try JSONDecoder().decode(LoginWaitResult.self, from: Data(prompt.utf8)).prompt?.kind, .unknown("choice"))
    }

    func testARequestWithAFlowOutsideTheSetIsRefusedNamingTheChoices() throws {
        let line = Data(#"{"params":{"flow":"passkey","provider":"corp"}}"#.utf8)
        XCTAssertThrowsError(try JSONDecoder().decode(RequestParams<LoginStartParams>.self, from: line)) { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["params", "flow"])
            XCTAssertEqual(context.underlyingError as? UnknownWireValue, UnknownWireValue(choices: ["browser", "device", "terminal"]))
            XCTAssertFalse(context.debugDescription.contains("passkey"))
        }
        let known = try JSONDecoder().decode(RequestParams<LoginStartParams>.self, from: Data(#"{"params":{"flow":"device"}}"#.utf8))
        XCTAssertEqual(known.params?.flow, .device)
        // Encoding gives the same members back.
        let encoded = String(decoding: try encoder.encode(LoginStartParams(provider: "corp", flow: .terminal)), as: UTF8.self)
        XCTAssertEqual(try JSONDecoder().decode(LoginStartParams.self, from: Data(encoded.utf8)), LoginStartParams(provider: "corp", flow: .terminal))
        XCTAssertTrue(encoded.contains(#""flow":"terminal""#), encoded)
    }
}
