import OAuth
import XCTest

/// Dynamic client registration (RFC 7591) against the stub.
final class ClientRegistrationTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    private var endpoint: String { stub.baseURL + "/register" }
    private let request = ClientRegistrationRequest(redirectURIs: ["http://127.0.0.1:53682/callback"], softwareVersion: "1.2.3")

    private func register(_ answer: StubAnswer, initialAccessToken: String? = nil) async throws -> ClientRegistration {
        stub.route("/register", answer)
        return try await ClientRegistrar(transport: NetworkTransport(timeout: 5))
            .register(request, at: endpoint, initialAccessToken: initialAccessToken)
    }

    /// Glewlwyd 2.7's answer to a public registration: a confidential client with a secret.
    func testTheServersAnswerIsTakenAsGiven() async throws {
        let registration = try await register(.json("""
            {"client_id":"bWf3kX","client_secret":"fake-secret-9d8f7","client_secret_expires_at":0,"client_id_issued_at":1700000000,
             "token_endpoint_auth_method":"client_secret_basic","grant_types":["authorization_code","refresh_token"],
             "redirect_uris":["http://127.0.0.1:53682/callback"],"registration_access_token":"fake-rat","registration_client_uri":"\(stub.baseURL)/register/bWf3kX",
             "client_name":"authbroker"}
            """, status: 201))
        XCTAssertEqual(registration, ClientRegistration(
            clientID: "bWf3kX", clientSecret: "fake-secret-9d8f7", clientSecretExpiresAt: 0, registrationAccessToken: "fake-rat",
            registrationClientURI: stub.baseURL + "/register/bWf3kX", tokenEndpointAuthMethod: "client_secret_basic",
            grantTypes: ["authorization_code", "refresh_token"], redirectURIs: ["http://127.0.0.1:53682/callback"]))
        let plain = try await register(.json(#"{"client_id":"c2","scope":null}"#))
        XCTAssertEqual(plain, ClientRegistration(clientID: "c2"))
    }

    func testTheRequestIsANativePublicClientWithItsRedirectPort() async throws {
        _ = try await register(.json(#"{"client_id":"c"}"#, status: 201), initialAccessToken: "fake-initial-token")
        let sent = try XCTUnwrap(stub.requests.first)
        XCTAssertEqual(sent.method, "POST")
        XCTAssertEqual(sent.path, "/register")
        XCTAssertEqual(sent.headers["content-type"], "application/json")
        XCTAssertEqual(sent.headers["authorization"], "Bearer fake-initial-token")
        let body = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(sent.body)) as? [String: Any])
        XCTAssertEqual(body["application_type"] as? String, "native")
        XCTAssertEqual(body["token_endpoint_auth_method"] as? String, "none")
        XCTAssertEqual(body["response_types"] as? [String], ["code"])
        XCTAssertEqual(body["redirect_uris"] as? [String], ["http://127.0.0.1:53682/callback"])
        XCTAssertEqual(body["grant_types"] as? [String], ["authorization_code", "refresh_token"])
        XCTAssertEqual(body["client_name"] as? String, "authbroker")
        XCTAssertEqual(body["software_id"] as? String, "org.authbroker")
        XCTAssertEqual(body["software_version"] as? String, "1.2.3")
        XCTAssertNil(body["scope"])
        XCTAssertTrue(String(decoding: sent.body, as: UTF8.self).contains("http://127.0.0.1:53682/callback"))

        _ = try await register(.json(#"{"client_id":"c"}"#))
        XCTAssertNil(stub.requests.last?.headers["authorization"])
    }

    func testARefusalNamesTheServerAndHidesTheInitialAccessToken() async {
        let error = await expectError {
            try await register(.json(#"{"error":"invalid_client_metadata","error_description":"grant type urn:ietf:params:oauth:grant-type:device_code is not allowed for token fake-initial-token"}"#, status: 400),
                               initialAccessToken: "fake-initial-token")
        }
        guard case .provider(let code, let description, let status)? = error, let description else {
            return XCTFail("got \(String(describing: error))")
        }
        XCTAssertEqual(code, "invalid_client_metadata")
        XCTAssertEqual(status, 400)
        XCTAssertTrue(description.hasPrefix("the registration endpoint at \(endpoint) refused the registration: grant type"), description)
        XCTAssertFalse(description.contains("fake-initial-token"), description)
        XCTAssertTrue(error?.message.contains("127.0.0.1") == true)

        let bare = await expectError { try await register(.json(#"{"error":"invalid_redirect_uri"}"#, status: 400)) }
        XCTAssertEqual(bare, .provider(oauthCode: "invalid_redirect_uri",
                                       description: "the registration endpoint at \(endpoint) refused the registration", httpStatus: 400))
        let closed = await expectError { try await register(.empty(status: 401)) }
        XCTAssertEqual(closed, .provider(oauthCode: "invalid_token",
                                         description: "the registration endpoint at \(endpoint) takes only clients registered with an initial access token (HTTP 401)",
                                         httpStatus: 401))
    }

    func testGarbageIsNamedWithoutTheSecret() async {
        let cases: [(StubAnswer, String)] = [
            (.text("<html>welcome</html>", status: 201), "answered something that is not a JSON object"),
            (.json(#"{"client_secret":"fake-secret-1234567"}"#, status: 201), "answered a registration without client_id"),
            (.json(#"{"client_id":"","client_secret":"fake-secret-1234567"}"#), "answered a registration with an empty client_id"),
            (.json(#"{"client_id":"c","client_secret":"fake-secret-1234567","grant_types":"authorization_code"}"#),
             "answered a registration whose grant_types is not a list of strings"),
            (.json(#"{"client_id":"c","client_secret":"fake-secret-1234567","client_secret_expires_at":"never"}"#),
             "answered a registration whose client_secret_expires_at is not a number"),
            (.json(#"{"client_id":7}"#), "answered a registration whose client_id is not a string"),
            (.text("oops", status: 500), "answered HTTP 500"),
            (StubAnswer(status: 307, headers: ["Location": "https://elsewhere.example/register"]), "answered HTTP 307 (a redirect"),
        ]
        for (answer, said) in cases {
            let error = await expectError { try await register(answer) }
            guard case .invalidResponse(let message)? = error else { XCTFail("\(said): got \(String(describing: error))"); continue }
            XCTAssertTrue(message.hasPrefix("the registration endpoint at \(endpoint) \(said)"), message)
            XCTAssertFalse(message.contains("fake-secret"), message)
        }
    }

    func testBusyAndMissing() async {
        let busy = await expectError { try await register(StubAnswer(status: 503, headers: ["Retry-After": "30"])) }
        XCTAssertEqual(busy, .busy("the registration endpoint at \(endpoint) answered HTTP 503", retryAfter: .seconds(30)))
        let missing = await expectError { try await register(.json(#"{"error":"not_found"}"#, status: 404)) }
        XCTAssertEqual(missing, .endpointNotFound("the registration endpoint at \(endpoint) answered HTTP 404 (not found)"))
    }

    func testAPlainHTTPEndpointOffLoopbackIsRefusedWithoutARequest() async {
        let error = await expectError {
            try await ClientRegistrar(transport: NoNetworkTransport()).register(request, at: "http://as.example/register")
        }
        XCTAssertEqual(error, .configuration("the registration endpoint http://as.example/register must use https (http is allowed only on a loopback host)"))
    }
}
