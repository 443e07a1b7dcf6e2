import XCTest
import BrokerClient
@testable import authctl

/// authctl on the remote end of an ssh connection: a socket that is not there is a forward
/// that is missing, not a daemon to start on that host.
final class RemoteSideTests: XCTestCase {
    private let inSSH: (String) -> String? = { $0 == "SSH_CONNECTION" ? "10.0.0.2 50000 10.0.0.9 22" : nil }
    private let local: (String) -> String? = { _ in nil }

    func testAMissingSocketInAnSSHSessionPointsAtTheForward() {
        let sentence = DaemonCall.sentence(for: .daemonNotRunning(path: "/run/user/1000/authbroker/socket"), environment: inSSH)
        XCTAssertTrue(sentence.contains("ssh session"), sentence)
        XCTAssertTrue(sentence.contains("ssh -R /run/user/1000/authbroker/socket:"), sentence)
        XCTAssertTrue(sentence.contains("StreamLocalBindUnlink"), sentence)
        XCTAssertFalse(sentence.contains("authbrokerd &"), sentence)
    }

    func testNoSocketPathInAnSSHSessionSaysToSetTheForwardedPath() {
        let sentence = DaemonCall.sentence(for: .noSocketPath, environment: inSSH)
        XCTAssertTrue(sentence.contains("AUTHBROKER_SOCKET") && sentence.contains("forward"), sentence)
    }

    func testASocketPathOtherThanTheDefaultMayBeAForwardToo() {
        let elsewhere: (String) -> String? = { ["AUTHBROKER_SOCKET": "/tmp/fwd.sock", "XDG_RUNTIME_DIR": "/run/user/1000"][$0] }
        let sentence = DaemonCall.sentence(for: .daemonNotRunning(path: "/tmp/fwd.sock"), environment: elsewhere)
        XCTAssertTrue(sentence.contains("authbrokerd &"), sentence)
        XCTAssertTrue(sentence.contains("forward"), sentence)
        let usual: (String) -> String? = { ["AUTHBROKER_SOCKET": "/run/user/1000/authbroker/socket", "XDG_RUNTIME_DIR": "/run/user/1000"][$0] }
        XCTAssertFalse(DaemonCall.sentence(for: .daemonNotRunning(path: "/run/user/1000/authbroker/socket"), environment: usual).contains("forward"))
    }

    func testOutsideSSHTheAdviceIsToStartTheDaemon() {
        let sentence = DaemonCall.sentence(for: .daemonNotRunning(path: "/run/user/1000/authbroker/socket"), environment: local)
        XCTAssertTrue(sentence.contains("authbrokerd &"), sentence)
        XCTAssertFalse(sentence.contains("forward"), sentence)
    }
}
