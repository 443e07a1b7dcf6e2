import OAuth
import XCTest

final class TransportTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    func testHangingProviderTimesOut() async {
        stub.route("/token", .hanging)
        let started = ContinuousClock.now
        let error = await expectError {
            try await stubClient(self.stub, timeout: 1).refresh(stubMetadata(self.stub), refreshToken: "r", resource: nil, scopes: nil)
        }
        let elapsed = ContinuousClock.now - started
        XCTAssertEqual(error, .unreachable("cannot reach 127.0.0.1:\(stub.port): no answer within 1 s"))
        XCTAssertLessThan(elapsed, .seconds(3))
    }

    func testConnectionRefused() async throws {
        let port = try StubProvider.closedPort()
        let transport = NetworkTransport(timeout: 5)
        let error = await expectError { try await transport.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/x?code=secret")) }
        XCTAssertEqual(error, .unreachable("cannot reach 127.0.0.1:\(port): connection refused"))
    }

    func testHeadersAreLowercasedAndRedirectsNotFollowed() async throws {
        stub.route("/moved", StubAnswer(status: 302, headers: ["Location": "/elsewhere", "X-Thing": "1"]))
        let response = try await NetworkTransport().send(HTTPRequest(method: "GET", url: stub.baseURL + "/moved"))
        XCTAssertEqual(response.status, 302)
        XCTAssertEqual(response.headers["x-thing"], "1")
        XCTAssertEqual(stub.requests.map(\.path), ["/moved"])
    }

    func testOversizedBodyIsRefused() async {
        stub.route("/big", StubAnswer(status: 200, body: [UInt8](repeating: 0x61, count: (1 << 20) + 1)))
        let error = await expectError { try await NetworkTransport().send(HTTPRequest(method: "GET", url: self.stub.baseURL + "/big")) }
        guard case .invalidResponse? = error else { return XCTFail("got \(String(describing: error))") }
    }

    func testCancellationStopsTheRequest() async {
        stub.route("/token", .hanging)
        let url = stub.baseURL + "/token"
        let task = Task { () async -> OAuthError? in
            await expectError { try await NetworkTransport(timeout: 30).send(HTTPRequest(method: "GET", url: url)) }
        }
        try? await Task.sleep(for: .milliseconds(200))
        task.cancel()
        let error = await task.value
        XCTAssertEqual(error, .unreachable("the request to 127.0.0.1:\(stub.port) was cancelled"))
    }
}
