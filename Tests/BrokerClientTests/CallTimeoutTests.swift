@testable import BrokerClient
import BrokerProtocol
import Foundation
import Glibc
import XCTest

/// Every call but `login.wait` ends at the connection's deadline: a socket-activated daemon
/// that cannot start leaves the client in the socket's backlog, where nothing else would
/// end its wait.
final class CallTimeoutTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ab-timeout-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A listening socket nobody accepts from: what systemd holds while the service it
    /// would start hangs or keeps failing.
    private func listeningSocket() throws -> (fd: Int32, path: String) {
        let path = directory + "/sock"
        let fd = BrokerClientTests.listeningSocket(at: path)
        return (fd, path)
    }

    func testACallToADaemonThatNeverAnswersEndsAtTheDeadline() throws {
        let (fd, path) = try listeningSocket()
        defer { close(fd) }
        let connection = try BrokerConnection(path: path, callTimeout: .milliseconds(200))
        XCTAssertThrowsError(try connection.status()) { error in
            XCTAssertEqual(error as? ClientError, .timedOut(method: "daemon.status", after: .milliseconds(200)))
            XCTAssertEqual("\(error)", "authbrokerd did not answer daemon.status within 200 ms")
        }
        XCTAssertThrowsError(try connection.token(TokenGetParams(resource: "https://api.example"))) { error in
            XCTAssertEqual(error as? ClientError, .timedOut(method: "token.get", after: .milliseconds(200)))
        }
        // A call's own timeout wins over the connection's.
        XCTAssertThrowsError(try connection.accounts(timeout: .milliseconds(50))) { error in
            XCTAssertEqual(error as? ClientError, .timedOut(method: "account.list", after: .milliseconds(50)))
        }
    }

    func testTheDefaultDeadlineIsFifteenSeconds() throws {
        let (fd, path) = try listeningSocket()
        defer { close(fd) }
        XCTAssertEqual(try BrokerConnection(path: path).callTimeout, .seconds(15))
        XCTAssertEqual(ClientError.timedOut(method: "token.get", after: .seconds(15)).description,
                       "authbrokerd did not answer token.get within 15 s")
    }

    func testASignInsWaitIsNotCutShortByTheDeadline() throws {
        let (fd, path) = try listeningSocket()
        defer { close(fd) }
        // The "user" finishes well after the connection's deadline; the daemon then answers.
        let server = Thread {
            let peer = accept(fd, nil, nil)
            guard peer >= 0 else { return }
            var byte: UInt8 = 0
            while read(peer, &byte, 1) == 1 && byte != UInt8(ascii: "\n") {}
            usleep(600_000)
            let answer = #"{"jsonrpc":"2.0","id":1,"error":{"code":-32007,"message":"the sign-in expired"}}"# + "\n"
            _ = answer.withCString { write(peer, $0, strlen($0)) }
            close(peer)
        }
        server.start()
        let connection = try BrokerConnection(path: path, callTimeout: .milliseconds(100))
        XCTAssertThrowsError(try connection.loginWait(LoginWaitParams(loginID: "x"))) { error in
            guard case .rpc(let rpc)? = error as? ClientError else {
                return XCTFail("login.wait should wait for the daemon's answer, got \(error)")
            }
            XCTAssertEqual(rpc.message, "the sign-in expired")
        }
    }
}
