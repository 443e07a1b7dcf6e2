import OAuth
import XCTest

final class DeviceFlowTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    func testDeviceAuthorizationSendsScopeAndRepeatedResources() async throws {
        stub.route("/device", .json("""
        {"device_code":"fake-device","user_code":"WDJB-MJHT","verification_uri":"https://idp.example/device",
         "verification_uri_complete":"https://idp.example/device?user_code=WDJB-MJHT","expires_in":"1800"}
        """))
        let authorization = try await stubClient(stub).startDeviceAuthorization(
            stubMetadata(stub), scopes: ["openid", "offline_access"], resources: ["https://a.example/", "https://b.example/"])
        XCTAssertEqual(authorization.userCode, "WDJB-MJHT")
        XCTAssertEqual(authorization.expiresIn, 1800)
        XCTAssertEqual(authorization.interval, 5)
        let request = try XCTUnwrap(stub.requests.first)
        XCTAssertEqual(request.path, "/device")
        XCTAssertEqual(request.value("client_id"), "broker-test")
        XCTAssertEqual(request.value("scope"), "openid offline_access")
        XCTAssertEqual(request.values("resource"), ["https://a.example/", "https://b.example/"])
    }

    func testMissingDeviceEndpoint() async {
        var metadata = stubMetadata(stub)
        metadata.deviceAuthorizationEndpoint = nil
        let error = await expectError { try await stubClient(self.stub).startDeviceAuthorization(metadata, scopes: [], resources: []) }
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("no device authorization endpoint"), message)
    }

    func testPollMapping() async throws {
        stub.route("/token",
                   .json(#"{"error":"authorization_pending"}"#, status: 400), .json(#"{"error":"slow_down"}"#, status: 400),
                   .json(#"{"error":"access_denied"}"#, status: 400), .json(#"{"error":"expired_token"}"#, status: 400),
                   bearerAnswer)
        let client = stubClient(stub)
        let metadata = stubMetadata(stub)
        let pending = try await client.pollDeviceToken(metadata, deviceCode: "d")
        XCTAssertEqual(pending, .pending)
        let slowDown = try await client.pollDeviceToken(metadata, deviceCode: "d")
        XCTAssertEqual(slowDown, .slowDown)
        let denied = await expectError { try await client.pollDeviceToken(metadata, deviceCode: "d") }
        XCTAssertEqual(denied, .provider(oauthCode: "access_denied", description: nil, httpStatus: 400))
        let expired = await expectError { try await client.pollDeviceToken(metadata, deviceCode: "d") }
        XCTAssertEqual(expired, .provider(oauthCode: "expired_token", description: nil, httpStatus: 400))
        guard case .tokens(let tokens) = try await client.pollDeviceToken(metadata, deviceCode: "d") else {
            return XCTFail("expected tokens")
        }
        XCTAssertEqual(tokens.expiresIn, 3600)
        XCTAssertEqual(stub.requests[0].value("grant_type"), "urn:ietf:params:oauth:grant-type:device_code")
        XCTAssertEqual(stub.requests[0].value("device_code"), "d")
    }
}
