@testable import BrokerCore
import XCTest

/// The pace of sign-ins on demand that programs abandon (`AbandonedSignIns`), on a moved clock.
final class AbandonedSignInsTests: XCTestCase {
    func testThreeAbandonedAreFreeThenThePauseDoublesUpToTenMinutes() {
        let pace = AbandonedSignIns()
        var now = 1_000.0
        for _ in 0..<3 {
            XCTAssertNil(pace.pause(provider: "corp", now: now))
            pace.abandoned(provider: "corp", now: now)
        }
        XCTAssertEqual(pace.pause(provider: "corp", now: now), 30)
        XCTAssertNil(pace.pause(provider: "other", now: now), "each provider has its own pace")
        now += 30
        XCTAssertNil(pace.pause(provider: "corp", now: now))
        pace.abandoned(provider: "corp", now: now)
        XCTAssertEqual(pace.pause(provider: "corp", now: now), 60)
        for _ in 0..<10 { pace.abandoned(provider: "corp", now: now) }
        XCTAssertEqual(pace.pause(provider: "corp", now: now), 600, "never longer than 10 minutes")
    }

    func testASignInThatFinishesStartsTheCountAgain() {
        let pace = AbandonedSignIns()
        for _ in 0..<5 { pace.abandoned(provider: "corp", now: 0) }
        XCTAssertNotNil(pace.pause(provider: "corp", now: 0))
        pace.finished(provider: "corp")
        XCTAssertNil(pace.pause(provider: "corp", now: 0))
    }
}
