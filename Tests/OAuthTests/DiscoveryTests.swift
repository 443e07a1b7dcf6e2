import OAuth
import XCTest

final class DiscoveryTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    private func document(issuer: String, token: String? = nil) -> StubAnswer {
        .json("""
        {"issuer":"\(issuer)","token_endpoint":"\(token ?? stub.baseURL + "/token")",
         "device_authorization_endpoint":"\(stub.baseURL)/device","revocation_endpoint":"\(stub.baseURL)/revoke",
         "token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post"],"extra":{"a":[1,null]}}
        """)
    }

    func testDiscoveryReadsTheDocument() async throws {
        stub.route("/realms/test/.well-known/openid-configuration", document(issuer: stub.baseURL + "/realms/test/"))
        let client = OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL + "/realms/test/", clientID: "c"),
                                 transport: NetworkTransport(timeout: 5))
        let metadata = try await client.discover()
        XCTAssertEqual(metadata.tokenEndpoint, stub.baseURL + "/token")
        XCTAssertEqual(metadata.deviceAuthorizationEndpoint, stub.baseURL + "/device")
        XCTAssertEqual(metadata.tokenEndpointAuthMethodsSupported, ["client_secret_basic", "client_secret_post"])
        XCTAssertEqual(stub.requests.first?.method, "GET")
    }

    func testIssuerMismatchIsRefused() async {
        stub.route("/.well-known/openid-configuration", document(issuer: "https://evil.example"))
        let error = await expectError { try await stubClient(stub).discover() }
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("https://evil.example"), message)
    }

    func testPlainHTTPEndpointOffLoopbackIsRefused() async {
        stub.route("/.well-known/openid-configuration", document(issuer: stub.baseURL, token: "http://idp.example/token"))
        let error = await expectError { try await stubClient(stub).discover() }
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("token_endpoint"), message)
    }

    func testPlainHTTPIssuerOffLoopbackIsRefusedWithoutARequest() async {
        for issuer in ["http://idp.example", "http://192.0.2.1:8080/realm", "ftp://idp.example", "http://127.0.0.1.example"] {
            let client = OAuthClient(configuration: ClientConfiguration(issuer: issuer, clientID: "c"),
                                     transport: NoNetworkTransport())
            let error = await expectError { try await client.discover() }
            guard case .configuration(let message)? = error else { return XCTFail("\(issuer): got \(String(describing: error))") }
            XCTAssertTrue(message.contains("https"), message)
        }
    }

    func testLoopbackRule() async throws {
        for issuer in ["http://localhost:1", "http://127.1.2.3:1", "http://[::1]:1", "https://idp.example"] {
            let client = OAuthClient(configuration: ClientConfiguration(issuer: issuer, clientID: "c"), transport: NoNetworkTransport())
            let error = await expectError { try await client.discover() }
            XCTAssertEqual(error, .unreachable("no network in this test"), issuer)
        }
    }

    func testServerErrorAndGarbageAreInvalidResponses() async {
        stub.route("/.well-known/openid-configuration", .text("oops", status: 500), .text("<html>not json</html>"),
                   .json(#"{"issuer":"x"}"#), StubAnswer(status: 503, headers: ["Retry-After": "40"]))
        let unavailable = await expectError { try await stubClient(stub).discover() }
        XCTAssertEqual(unavailable, .invalidResponse("the provider's discovery document at \(stub.baseURL)/.well-known/openid-configuration answered HTTP 500"))
        let garbage = await expectError { try await stubClient(stub).discover() }
        guard case .invalidResponse? = garbage else { return XCTFail("got \(String(describing: garbage))") }
        let incomplete = await expectError { try await stubClient(stub).discover() }
        guard case .invalidResponse(let message)? = incomplete else { return XCTFail("got \(String(describing: incomplete))") }
        XCTAssertTrue(message.contains("token_endpoint"), message)
        let busy = await expectError { try await stubClient(stub).discover() }
        XCTAssertEqual(busy, .busy("the provider's discovery document at \(stub.baseURL)/.well-known/openid-configuration answered HTTP 503", retryAfter: .seconds(40)))
    }

    /// A member of the wrong type is named, so the user can tell the provider's
    /// administrators which one to mend, not only that the document is "not valid".
    func testAMemberOfTheWrongTypeIsNamed() async {
        let cases = [
            ("grant_types_supported", #""grant_types_supported":"authorization_code""#),
            ("token_endpoint", #""token_endpoint":null"#),
            ("authorization_response_iss_parameter_supported", #""authorization_response_iss_parameter_supported":"true""#),
            ("code_challenge_methods_supported", #""code_challenge_methods_supported":["S256",7]"#),
        ]
        for (member, text) in cases {
            let token = member == "token_endpoint" ? "" : #""token_endpoint":"\#(stub.baseURL)/token","#
            stub.route("/.well-known/openid-configuration", .json(#"{"issuer":"\#(stub.baseURL)",\#(token)\#(text)}"#))
            let error = await expectError { try await stubClient(stub).discover() }
            guard case .invalidResponse(let message)? = error else { XCTFail("\(member): got \(String(describing: error))"); continue }
            XCTAssertTrue(message.contains(member), message)
            XCTAssertTrue(message.hasPrefix("the provider's discovery document at \(stub.baseURL)/.well-known/openid-configuration "), message)
        }
    }
}
