@testable import HTTPClient
import XCTest

/// The proxy paths end to end, through `proxy_stub.py` (a STUB proxy). Every test server
/// is on loopback, which real settings never proxy, so these settings proxy it on purpose.
final class ProxyTests: XCTestCase {
    private static let certificates = Result { try TestCertificates.make() }
    private var servers: [ScriptServer] = []

    override func tearDown() { servers.forEach { $0.stop() } }

    private func start(_ script: String, _ arguments: [String] = []) throws -> Int {
        let server = try ScriptServer(script, arguments: arguments)
        servers.append(server)
        return server.port
    }

    private func settings(_ environment: [String: String]) -> ProxySettings {
        var settings = ProxySettings(environment: environment)
        settings.proxiesLoopback = true
        return settings
    }

    func testHTTPSGoesThroughACONNECTTunnel() async throws {
        let certificates = try Self.certificates.get()
        let origin = try start("origin_server.py", certificates.cert("trusted"))
        let proxy = try start("proxy_stub.py")
        let client = testClient(proxies: settings(["https_proxy": "http://127.0.0.1:\(proxy)"]), caFile: certificates.caFile)
        let response = try await client.send(method: "GET", url: "https://localhost:\(origin)/echo?x=1")
        XCTAssertEqual(response.status, 200)
        XCTAssertTrue(text(response).hasPrefix("GET /echo?x=1 HTTP/1.1\r\n"), "the origin sees an origin-form request")
    }

    func testHTTPGoesThroughTheProxyInAbsoluteForm() async throws {
        let proxy = try start("proxy_stub.py")
        let client = testClient(proxies: settings(["http_proxy": "127.0.0.1:\(proxy)"]))
        let response = try await client.send(method: "GET", url: "http://localhost:4711/path?q=1")
        XCTAssertEqual(text(response), "GET http://localhost:4711/path?q=1 HTTP/1.1")
    }

    func testProxyCredentialsAreSentAndA407IsReported() async throws {
        let certificates = try Self.certificates.get()
        let origin = try start("origin_server.py", certificates.cert("trusted"))
        let proxy = try start("proxy_stub.py", ["--require-auth", "alice:pw"])
        let url = "https://localhost:\(origin)/chunked"

        let anonymous = testClient(proxies: settings(["https_proxy": "http://127.0.0.1:\(proxy)"]), caFile: certificates.caFile)
        let error = await expectError { () async throws(HTTPClientError) in try await anonymous.send(method: "GET", url: url) }
        guard case .proxyFailed(let name, let host, let reason)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertEqual(name, "127.0.0.1:\(proxy)")
        XCTAssertEqual(host, "localhost:\(origin)")
        XCTAssertTrue(reason.contains("407"), reason)

        let signedIn = testClient(proxies: settings(["https_proxy": "http://alice:pw@127.0.0.1:\(proxy)"]), caFile: certificates.caFile)
        let response = try await signedIn.send(method: "GET", url: url)
        XCTAssertEqual(text(response), "hello, world")
        XCTAssertFalse(String(describing: signedIn).contains("pw@"))
    }

    func testAnUnreachableTunnelTargetIsA502() async throws {
        let proxy = try start("proxy_stub.py")
        let closed = try start("origin_server.py")
        servers.removeLast().stop()
        let client = testClient(proxies: settings(["https_proxy": "http://127.0.0.1:\(proxy)"]))
        let error = await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: "https://127.0.0.1:\(closed)/") }
        guard case .proxyFailed(_, _, let reason)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(reason.contains("502"), reason)
    }

    func testARefusingProxyAndAnUnusableSettingAreProxyFailures() async throws {
        let closed = try start("proxy_stub.py")
        servers.removeLast().stop()
        let refused = await expectError { () async throws(HTTPClientError) in
            try await testClient(proxies: self.settings(["https_proxy": "http://127.0.0.1:\(closed)"])).send(method: "GET", url: "https://idp.example/")
        }
        guard case .proxyFailed(let proxy, "idp.example", _)? = refused else { return XCTFail("got \(String(describing: refused))") }
        XCTAssertEqual(proxy, "127.0.0.1:\(closed)")
        let unusable = await expectError { () async throws(HTTPClientError) in
            try await testClient(proxies: ProxySettings(environment: ["https_proxy": "socks5://p:1"])).send(method: "GET", url: "https://idp.example/")
        }
        guard case .proxyFailed("https_proxy", _, _)? = unusable else { return XCTFail("got \(String(describing: unusable))") }
    }
}
