import OAuth
import XCTest

/// Runs `body`, which must throw an `OAuthError`, and returns that error.
func expectError<T>(_ body: () async throws -> T, file: StaticString = #filePath,
                    line: UInt = #line) async -> OAuthError? {
    do {
        _ = try await body()
        XCTFail("expected an OAuthError", file: file, line: line)
        return nil
    } catch let error as OAuthError {
        return error
    } catch {
        XCTFail("expected an OAuthError, got \(type(of: error))", file: file, line: line)
        return nil
    }
}

/// Metadata whose endpoints all live on `stub`.
func stubMetadata(_ stub: StubProvider, authMethods: [String]? = nil) -> ProviderMetadata {
    ProviderMetadata(issuer: stub.baseURL, tokenEndpoint: stub.baseURL + "/token",
                     deviceAuthorizationEndpoint: stub.baseURL + "/device", revocationEndpoint: stub.baseURL + "/revoke",
                     tokenEndpointAuthMethodsSupported: authMethods)
}

/// A client of `stub` with a short transport time-out.
func stubClient(_ stub: StubProvider, secret: String? = nil, audienceParameter: String = "resource",
                timeout: TimeInterval = 5) -> OAuthClient {
    OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL, clientID: "broker-test", clientSecret: secret,
                                                   audienceParameter: audienceParameter),
                transport: NetworkTransport(timeout: timeout))
}

let bearerAnswer = StubAnswer.json(#"{"access_token":"fake-access","token_type":"bearer","expires_in":3600,"refresh_token":"fake-refresh-2","scope":"openid"}"#)

/// A transport for tests that must not send anything: every request is an error.
struct NoNetworkTransport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        throw .unreachable("no network in this test")
    }
}
