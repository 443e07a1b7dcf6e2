import BrokerCrypto
@testable import BrokerServer
import XCTest

/// `login.answer`'s value read from the line's bytes (`SecretAnswer`): JSON escapes as
/// JSONDecoder reads them, and nil for what it would refuse.
final class SecretAnswerTests: XCTestCase {
    private func value(_ line: String) -> String? {
        Array(line.utf8).withUnsafeBytes { SecretAnswer.value(in: $0) }?.text
    }

    func testPlainEscapedAndNonASCIIAnswersReadAsJSONDecoderReadsThem() {
        XCTAssertEqual(value(#"{"jsonrpc":"2.0","id":1,"method":"login.answer","params":{"login_id":"x","value":"alice-password"}}"#), "alice-password")
        XCTAssertEqual(value(#"{"params": {"value": "q\"b\\s\/n\n\u00e9\ud83d\ude00 w\u00f6rd", "login_id":"x"}, "id":[1,{"a":null}]}"#),
                       "q\"b\\s/n\né😀 wörd")
        XCTAssertEqual(value(#"{"params":{"value":""}}"#), "")
        XCTAssertEqual(value(#"{"id":-1.5e3,"params":{"other":{"value":"no"},"value":"yes"}}"#), "yes", "only params.value")
    }

    func testMissingOrMalformedValuesAreNil() {
        XCTAssertNil(value(#"{"params":{"login_id":"x"}}"#))
        XCTAssertNil(value(#"{"params":{"value":42}}"#))
        XCTAssertNil(value(#"{"params":{"value":"bad \x escape"}}"#))
        XCTAssertNil(value(#"{"params":{"value":"lone \ud83d surrogate"}}"#))
        XCTAssertNil(value(#"{"params":{"value":"unterminated}}"#))
        XCTAssertNil(value(#"{"params":"#))
    }
}
