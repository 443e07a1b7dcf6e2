import Foundation
import OAuth
import XCTest

final class TokenEndpointTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    func testRefreshSendsTheGrantAndReadsTheAnswer() async throws {
        stub.route("/token", bearerAnswer)
        let tokens = try await stubClient(stub).refresh(stubMetadata(stub), refreshToken: "fake refresh+1",
                                                        resource: "https://api.example/", scopes: ["openid", "email"])
        XCTAssertEqual(tokens, TokenResponse(accessToken: "fake-access", tokenType: "Bearer", expiresIn: 3600,
                                             refreshToken: "fake-refresh-2", idToken: nil, scope: "openid"))
        let request = try XCTUnwrap(stub.requests.first)
        XCTAssertEqual(request.method, "POST")
        XCTAssertEqual(request.path, "/token")
        XCTAssertEqual(request.headers["content-type"], "application/x-www-form-urlencoded")
        XCTAssertNil(request.headers["authorization"])
        XCTAssertEqual(request.value("grant_type"), "refresh_token")
        XCTAssertEqual(request.value("refresh_token"), "fake refresh+1")
        XCTAssertEqual(request.value("resource"), "https://api.example/")
        XCTAssertEqual(request.value("scope"), "openid email")
        XCTAssertEqual(request.value("client_id"), "broker-test")
        let body = String(decoding: request.body, as: UTF8.self)
        XCTAssertTrue(body.contains("refresh_token=fake%20refresh%2B1"))
        XCTAssertTrue(body.contains("resource=https%3A%2F%2Fapi.example%2F"))
    }

    func testAudienceParameterAndNoOptionalParameters() async throws {
        stub.route("/token", bearerAnswer)
        let client = stubClient(stub, audienceParameter: "audience")
        _ = try await client.refresh(stubMetadata(stub), refreshToken: "r", resource: "api://x", scopes: nil)
        _ = try await client.refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: [])
        XCTAssertEqual(stub.requests[0].value("audience"), "api://x")
        XCTAssertNil(stub.requests[0].value("resource"))
        XCTAssertNil(stub.requests[1].value("audience"))
        XCTAssertNil(stub.requests[1].value("scope"))
    }

    func testEmpty400IsInvalidGrant() async {
        stub.route("/token", .empty(status: 400))
        let error = await expectError { try await stubClient(stub).refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil) }
        XCTAssertEqual(error, .provider(oauthCode: "invalid_grant", description: "the provider refused the grant", httpStatus: 400))
        XCTAssertEqual(error?.isInvalidGrant, true)
    }

    func testErrorJSONIsMapped() async {
        stub.route("/token", .json(#"{"error":"invalid_grant","error_description":"Token is not active\u0007"}"#, status: 400),
                   .json(#"{"error":"invalid_client"}"#, status: 401), .empty(status: 401))
        let metadata = stubMetadata(stub)
        let client = stubClient(stub)
        let first = await expectError { try await client.refresh(metadata, refreshToken: "r", resource: nil, scopes: nil) }
        XCTAssertEqual(first, .provider(oauthCode: "invalid_grant", description: "Token is not active", httpStatus: 400))
        let second = await expectError { try await client.refresh(metadata, refreshToken: "r", resource: nil, scopes: nil) }
        XCTAssertEqual(second, .provider(oauthCode: "invalid_client", description: nil, httpStatus: 401))
        let third = await expectError { try await client.refresh(metadata, refreshToken: "r", resource: nil, scopes: nil) }
        guard case .provider("invalid_client", _, 401)? = third else { return XCTFail("got \(String(describing: third))") }
    }

    func testServerErrorsAndGarbageAreInvalidResponses() async {
        stub.route("/token", .text("upstream down", status: 500), .text("<html>hello</html>"),
                   .json(#"{"error":"server_error"}"#, status: 502), .json(#"{"token_type":"Bearer"}"#),
                   StubAnswer(status: 302, headers: ["Location": "/elsewhere"]))
        let metadata = stubMetadata(stub)
        let client = stubClient(stub)
        var messages: [String] = []
        for _ in 0..<5 {
            let error = await expectError { try await client.refresh(metadata, refreshToken: "r", resource: nil, scopes: nil) }
            guard case .invalidResponse(let message)? = error else { return XCTFail("got \(String(describing: error))") }
            messages.append(message)
        }
        XCTAssertEqual(messages[0], "the provider's token endpoint answered HTTP 500")
        XCTAssertEqual(messages[2], "the provider's token endpoint answered HTTP 502")
        XCTAssertEqual(messages[3], "the provider's token answer has no access_token")
        XCTAssertTrue(messages[4].contains("302"), messages[4])
        XCTAssertFalse(messages.joined().contains("fake"))
    }

    /// A token of a type the broker cannot use (issue 37, item 8) is the client's set-up at
    /// the provider, which answers the same every time: a configuration error, not a broken
    /// answer to back off from and retry.
    func testAnUnknownTokenTypeIsAConfigurationError() async {
        stub.route("/token", .json(#"{"access_token":"fake","token_type":"mac","expires_in":3600}"#))
        let error = await expectError { try await stubClient(self.stub).refresh(stubMetadata(self.stub), refreshToken: "r", resource: nil, scopes: nil) }
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("a token of type mac, which authbroker cannot use"), message)
        XCTAssertFalse(message.contains("fake"))
        XCTAssertEqual(error?.isNoAnswer, false, "an answer, not a lost request: the refresh is not sent again")
    }

    /// A provider that quotes what it refuses must not make a credential part of a sentence:
    /// the refresh token whole, form-encoded or cut short, and the client secret.
    func testErrorTextNeverRepeatsTheCredentialsSent() async {
        let refreshToken = "rt/Secret+Value=0123456789abcdef"
        let encoded = "rt%2FSecret%2BValue%3D0123456789abcdef"
        stub.route("/token", .json(#"{"error":"invalid_request","error_description":"grant \#(refreshToken) (\#(encoded)) starting 'rt/Secret+Val...' for client sec-XYZ-987654 is not valid."}"#, status: 400))
        let error = await expectError {
            try await stubClient(self.stub, secret: "sec-XYZ-987654").refresh(stubMetadata(self.stub), refreshToken: refreshToken, resource: nil, scopes: nil)
        }
        guard case .provider("invalid_request", let description?, 400)? = error else { return XCTFail("got another error") }
        XCTAssertEqual(description, "grant [redacted] ([redacted]) starting '[redacted]...' for client [redacted] is not valid.")
    }

    /// 429, 503 and `temporarily_unavailable` (at any status) say "not now", with the
    /// Retry-After the provider gave, in seconds or as an HTTP-date.
    func testBusyAnswersCarryRetryAfter() async {
        stub.route("/token", StubAnswer(status: 429, headers: ["Retry-After": "40"], body: Array("slow down".utf8)),
                   .text("upstream down", status: 503),
                   StubAnswer(status: 400, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"],
                              body: Array(#"{"error":"temporarily_unavailable","error_description":"later"}"#.utf8)),
                   .json(#"{"error":"temporarily_unavailable"}"#, status: 502), .json(#"{"error":"slow_down"}"#, status: 429))
        let metadata = stubMetadata(stub)
        let client = stubClient(stub)
        var answers: [OAuthError?] = []
        for _ in 0..<5 {
            answers.append(await expectError { try await client.refresh(metadata, refreshToken: "r", resource: nil, scopes: nil) })
        }
        XCTAssertEqual(answers[0], .busy("the provider's token endpoint answered HTTP 429 (too many requests)", retryAfter: .seconds(40)))
        XCTAssertEqual(answers[1], .busy("the provider's token endpoint answered HTTP 503", retryAfter: nil))
        XCTAssertEqual(answers[2], .busy("the provider's token endpoint answered temporarily_unavailable", retryAfter: .date(784_111_777)))
        XCTAssertEqual(answers[3], .busy("the provider's token endpoint answered temporarily_unavailable", retryAfter: nil))
        // RFC 8628's slow_down stays itself with a 429, so that the device poll slows down.
        XCTAssertEqual(answers[4], .provider(oauthCode: "slow_down", description: nil, httpStatus: 429))
        XCTAssertEqual(RetryAfter(header: " 7 "), .seconds(7))
        XCTAssertEqual(RetryAfter(header: "Thu, 01 Jan 1970 00:00:00 GMT"), .date(0))
        XCTAssertEqual(RetryAfter(header: "Tue, 29 Feb 2028 23:59:60 GMT"), .date(1_835_481_600))
        XCTAssertNil(RetryAfter(header: "Sunday, 06-Nov-94 08:49:37 GMT"))
        XCTAssertNil(RetryAfter(header: "-5"))
        XCTAssertEqual(RetryAfter.date(100).seconds(from: 40.5), 60)
        XCTAssertEqual(RetryAfter.date(100).seconds(from: 200), 0)
    }

    /// Retry-After is provider bytes: every IMF-fixdate from 1970 to 2199 reads as the
    /// formatter's time, and no string traps the parser.
    func testRetryAfterReadsEveryHTTPDateAndSurvivesAnyString() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17
            return seed
        }
        for _ in 0..<5000 {
            let at = Int64(next() % 7_258_118_400)  // up to 2200-01-01
            let header = formatter.string(from: Date(timeIntervalSince1970: Double(at)))
            XCTAssertEqual(RetryAfter(header: header), .date(at), header)
        }
        let alphabet = Array("0123456789 ,:-GMTSunMonJanFeb\t\u{0}é+")
        for _ in 0..<5000 {
            let text = String((0..<Int(next() % 40)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
            _ = RetryAfter(header: text)?.seconds(from: 1_800_000_000)
        }
        XCTAssertEqual(RetryAfter(header: "99999999999999999999999"), .seconds(999_999_999))
    }

    func testExpiresInAsStringAndTokenTypeCase() async throws {
        stub.route("/token", .json(#"{"access_token":"a","token_type":"BEARER","expires_in":"300","id_token":"x.y.z"}"#),
                   .json(#"{"access_token":"a","token_type":"Bearer","expires_in":"soon"}"#))
        let tokens = try await stubClient(stub).refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil)
        XCTAssertEqual(tokens.expiresIn, 300)
        XCTAssertEqual(tokens.tokenType, "Bearer")
        XCTAssertEqual(tokens.idToken, "x.y.z")
        let error = await expectError { try await stubClient(self.stub).refresh(stubMetadata(self.stub), refreshToken: "r", resource: nil, scopes: nil) }
        guard case .invalidResponse? = error else { return XCTFail("got \(String(describing: error))") }
    }

    func testClientSecretBasicHeader() async throws {
        stub.route("/token", bearerAnswer)
        let client = stubClient(stub, secret: "s3cret:/ x")
        _ = try await client.clientCredentials(stubMetadata(stub), resource: "urn:api", scopes: ["read"])
        let request = try XCTUnwrap(stub.requests.first)
        let expected = "Basic " + Data("broker-test:s3cret%3A%2F%20x".utf8).base64EncodedString()
        XCTAssertEqual(request.headers["authorization"], expected)
        XCTAssertEqual(request.value("grant_type"), "client_credentials")
        XCTAssertEqual(request.value("resource"), "urn:api")
        XCTAssertEqual(request.value("scope"), "read")
        XCTAssertNil(request.value("client_secret"))
        XCTAssertNil(request.value("client_id"))
    }

    func testClientSecretPostWhenOnlyThatIsOffered() async throws {
        stub.route("/token", bearerAnswer)
        let client = stubClient(stub, secret: "s")
        _ = try await client.exchangeCode(stubMetadata(stub, authMethods: ["client_secret_post", "private_key_jwt"]),
                                          code: "c", redirectURI: "http://127.0.0.1:1/cb", codeVerifier: "v", resource: nil)
        let request = try XCTUnwrap(stub.requests.first)
        XCTAssertNil(request.headers["authorization"])
        XCTAssertEqual(request.value("client_id"), "broker-test")
        XCTAssertEqual(request.value("client_secret"), "s")
        XCTAssertEqual(request.value("grant_type"), "authorization_code")
        XCTAssertEqual(request.value("code_verifier"), "v")
        XCTAssertEqual(request.value("redirect_uri"), "http://127.0.0.1:1/cb")
    }

    func testClientCredentialsNeedASecret() async {
        let error = await expectError { try await stubClient(stub).clientCredentials(stubMetadata(stub), resource: nil, scopes: nil) }
        guard case .configuration? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(stub.requests.isEmpty)
    }

    func testRevocation() async throws {
        stub.route("/revoke", .empty(status: 200), .json(#"{"error":"unsupported_token_type"}"#, status: 400), .text("", status: 500))
        let client = stubClient(stub)
        let metadata = stubMetadata(stub)
        let revoked = try await client.revoke(metadata, token: "t", tokenTypeHint: "refresh_token")
        XCTAssertTrue(revoked)
        XCTAssertEqual(stub.requests[0].value("token"), "t")
        XCTAssertEqual(stub.requests[0].value("token_type_hint"), "refresh_token")
        let declined = try await client.revoke(metadata, token: "t", tokenTypeHint: "access_token")
        XCTAssertFalse(declined)
        let failed = await expectError { try await client.revoke(metadata, token: "t", tokenTypeHint: "access_token") }
        guard case .invalidResponse? = failed else { return XCTFail("got \(String(describing: failed))") }
        var noEndpoint = metadata
        noEndpoint.revocationEndpoint = nil
        let missing = await expectError { try await client.revoke(noEndpoint, token: "t", tokenTypeHint: "access_token") }
        guard case .configuration? = missing else { return XCTFail("got \(String(describing: missing))") }
    }
}
