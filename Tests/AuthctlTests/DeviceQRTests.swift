@testable import authctl
import BrokerProtocol
import XCTest

/// Where the device sign-in's QR code goes among the instructions, and when there is none.
/// (Drawing it on a real terminal is test_login_qr.py's part.)
final class DeviceQRTests: XCTestCase {
    let device = LoginStartResult(loginID: "l", provider: "corp", flow: .device,
                                  verificationURI: "https://login.example.com/device",
                                  verificationURIComplete: "https://login.example.com/device?user_code=WDJB-MJHT",
                                  userCode: "WDJB-MJHT", expiresAt: 900)

    func testTheCodeGoesBetweenTheURLAndTheExpiry() {
        let lines = Login.instructions(for: device, now: 0, qr: ["QR1", "QR2"])
        XCTAssertEqual(lines.count, 5)
        XCTAssertTrue(lines[0].hasPrefix("To sign in to corp, open https://login.example.com/device and enter the code WDJB-MJHT"))
        XCTAssertTrue(lines[1].contains("which fills in the code"))
        XCTAssertEqual(Array(lines[2...3]), ["QR1", "QR2"])
        XCTAssertTrue(lines[4].hasPrefix("This sign-in expires in 15 minutes"))
    }

    func testWhatTheCodeHolds() {
        XCTAssertEqual(DeviceQR.url(for: device), "https://login.example.com/device?user_code=WDJB-MJHT")
        var plain = device
        plain.verificationURIComplete = nil
        XCTAssertEqual(DeviceQR.url(for: plain), "https://login.example.com/device")
        let browser = LoginStartResult(loginID: "l", provider: "corp", flow: .browser,
                                       authorizationURL: "https://login.example.com/authorize?x=1", expiresAt: 300)
        XCTAssertNil(DeviceQR.url(for: browser), "a browser sign-in's page redirects to this machine: no use on a phone")
        var withControl = device
        withControl.verificationURIComplete = "https://login.example.com/device\u{1B}]0;x\u{7}"
        XCTAssertNil(DeviceQR.url(for: withControl))
        XCTAssertEqual(DeviceQR.lines(for: device, enabled: false), [])
    }

    func testTheEnvironmentSwitch() {
        XCTAssertFalse(DeviceQR.switchedOff(nil))
        XCTAssertFalse(DeviceQR.switchedOff(""))
        XCTAssertFalse(DeviceQR.switchedOff("0"))
        XCTAssertTrue(DeviceQR.switchedOff("1"))
        XCTAssertTrue(DeviceQR.switchedOff("yes"))
    }
}
