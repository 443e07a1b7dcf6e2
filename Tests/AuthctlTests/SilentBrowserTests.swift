import XCTest
@testable import authctl

/// What `authctl login` says when a browser sign-in has been silent for `Login.silence`
/// seconds (scheduled by `Login.hintIfSilent`; the integration tests do not wait 30 s for it).
final class SilentBrowserTests: XCTestCase {
    func testTheHintNamesTheUsualCausesAndTheWayOut() {
        let hint = Login.silenceHint(provider: "corp")
        XCTAssertTrue(hint.hasPrefix("Nothing has come back from the browser in 30 seconds."), hint)
        XCTAssertTrue(hint.contains("set redirect_port for corp in config.toml"), hint)
        XCTAssertTrue(hint.contains("http://127.0.0.1:PORT/callback"), hint)
        XCTAssertTrue(hint.contains("authctl login --device"), hint)
        XCTAssertTrue(hint.hasSuffix("Still waiting…"), hint)
    }

    func testAProviderNameCannotWriteToTheTerminal() {
        let hint = Login.silenceHint(provider: "corp\u{1B}]0;owned\u{07}")
        XCTAssertFalse(hint.contains("\u{1B}") || hint.contains("\u{07}"), hint)
    }
}
