@testable import HTTPClient
import Glibc
import XCTest

final class TLSTests: XCTestCase {
    private static let certificates = Result { try TestCertificates.make() }
    private var certificates: TestCertificates { get throws { try Self.certificates.get() } }
    private var servers: [ScriptServer] = []

    override func tearDown() { servers.forEach { $0.stop() } }

    private func start(_ cert: String) throws -> Int {
        let server = try ScriptServer("origin_server.py", arguments: try certificates.cert(cert))
        servers.append(server)
        return server.port
    }

    func testHTTPSWithTheTestCAByNameAndByAddress() async throws {
        let port = try start("trusted")
        let client = testClient(caFile: try certificates.caFile)
        for url in ["https://localhost:\(port)/echo?code=x", "https://127.0.0.1:\(port)/chunked"] {
            let response = try await client.send(method: "GET", url: url)
            XCTAssertEqual(response.status, 200, url)
        }
        let posted = try await client.send(method: "POST", url: "https://localhost:\(port)/echo", body: Array("a=b".utf8))
        XCTAssertTrue(text(posted).hasPrefix("POST /echo HTTP/1.1\r\n"))
        XCTAssertTrue(text(posted).hasSuffix("\r\n\r\na=b"))
        let closeDelimited = try await client.send(method: "GET", url: "https://localhost:\(port)/close")
        XCTAssertEqual(text(closeDelimited), "until the end")
    }

    /// A close-delimited body whose connection ends without close_notify may be cut short
    /// by anyone on the path: it is lost, not complete.
    func testACloseDelimitedBodyWithoutCloseNotifyIsLost() async throws {
        let port = try start("trusted")
        let client = testClient(caFile: try certificates.caFile)
        let error = await expectError { () async throws(HTTPClientError) in
            try await client.send(method: "GET", url: "https://localhost:\(port)/closecut")
        }
        XCTAssertEqual(error, .connectionLost(host: "localhost:\(port)"))
        // Framed bodies are whole whether or not close_notify follows.
        let chunked = try await client.send(method: "GET", url: "https://localhost:\(port)/chunked")
        XCTAssertEqual(text(chunked), "hello, world")
    }

    /// The default trust honours SSL_CERT_FILE, as curl and the OpenSSL CLI do.
    func testSystemTrustReadsSSLCertFile() async throws {
        let port = try start("trusted")
        let previous = getenv("SSL_CERT_FILE").map { String(cString: $0) }
        setenv("SSL_CERT_FILE", try certificates.caFile, 1)
        defer {
            if let previous { setenv("SSL_CERT_FILE", previous, 1) } else { unsetenv("SSL_CERT_FILE") }
        }
        let client = HTTPClient(timeout: 5, maximumBodySize: 1 << 20, proxies: .none, trust: .system)
        let response = try await client.send(method: "GET", url: "https://localhost:\(port)/headers")
        XCTAssertEqual(response.headers["set-thing"], "1, 2")
    }

    func testACertificateFromAnUnknownCAIsNotTrusted() async throws {
        let port = try start("untrusted")
        let client = testClient(caFile: try certificates.caFile)
        let error = await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: "https://localhost:\(port)/echo") }
        guard case .certificateNotTrusted(let host, let reason)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertEqual(host, "localhost:\(port)")
        XCTAssertFalse(reason.isEmpty)
        XCTAssertFalse(reason.contains("BEGIN"))
    }

    func testACertificateForAnotherNameIsRefused() async throws {
        let port = try start("wrongname")
        let client = testClient(caFile: try certificates.caFile)
        for url in ["https://localhost:\(port)/echo", "https://127.0.0.1:\(port)/echo"] {
            let error = await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: url) }
            guard case .certificateNameMismatch? = error else { return XCTFail("\(url): got \(String(describing: error))") }
        }
    }

    /// What the user reads names the certificate's own fault and the step that mends it: a
    /// certificate for another name, or one out of date, is no matter of the CA store.
    func testEachCertificateFaultIsToldWithItsOwnNextStep() async throws {
        let client = testClient(caFile: try certificates.caFile)
        let cases: [(cert: String, says: [String], never: [String])] = [
            ("wrongname", ["does not name localhost", "hostname mismatch", "host name"], ["CA store", "SSL_CERT_FILE"]),
            ("expired", ["out of date", "certificate has expired", "clock"], ["CA store", "SSL_CERT_FILE"]),
            ("untrusted", ["not trusted", "CA store", "SSL_CERT_FILE"], []),
        ]
        for (cert, says, never) in cases {
            let port = try start(cert)
            let error = await expectError { () async throws(HTTPClientError) in
                try await client.send(method: "GET", url: "https://localhost:\(port)/echo")
            }
            let message = error?.message ?? ""
            XCTAssertTrue(message.hasPrefix("cannot reach localhost:\(port): "), "\(cert): \(message)")
            for part in says { XCTAssertTrue(message.contains(part), "\(cert): \(message) does not say \(part)") }
            for part in never { XCTAssertFalse(message.contains(part), "\(cert): \(message) sends the user to \(part)") }
            XCTAssertFalse(message.contains("BEGIN"), cert)
        }
    }

    func testTLSToAPlainServerFailsTheHandshake() async throws {
        let plain = try ScriptServer("origin_server.py", arguments: ["--eager"])
        servers.append(plain)
        let client = testClient(caFile: try certificates.caFile)
        let error = await expectError { () async throws(HTTPClientError) in
            try await client.send(method: "GET", url: "https://127.0.0.1:\(plain.port)/echo")
        }
        XCTAssertEqual(error?.message,
                       "cannot reach 127.0.0.1:\(plain.port): it does not speak TLS there (it answered plain HTTP or another protocol); check the scheme and the port in the URL")
    }

    func testCancellationDuringATLSRequest() async throws {
        let port = try start("trusted")
        let client = testClient(timeout: 60, caFile: try certificates.caFile)
        let task = Task { () async -> HTTPClientError? in
            await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: "https://localhost:\(port)/hang") }
        }
        try await Task.sleep(for: .milliseconds(300))
        task.cancel()
        let error = await task.value
        XCTAssertEqual(error, .cancelled(host: "localhost:\(port)"))
    }
}
