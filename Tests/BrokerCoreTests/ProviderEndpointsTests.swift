@testable import BrokerCore
import OAuth
import Synchronization
import XCTest

/// Endpoint keys in config.toml, the discovery document's lifetime, and account names.
final class ProviderEndpointsTests: XCTestCase {
    func testEndpointKeysAreRead() throws {
        let config = try ConfigLoader.parse("""
            [providers.corp]
            issuer = "https://login.example.com"
            client_id = "authbroker"
            device_authorization_endpoint = "https://login.example.com/device"
            revocation_endpoint = "https://login.example.com/revoke"
            userinfo_endpoint = "http://127.0.0.1:8080/userinfo"
            end_session_endpoint = "https://login.example.com/logout"
            introspection_endpoint = "https://login.example.com/introspect"
            """, file: "c.toml")
        let e = try XCTUnwrap(config.provider(named: "corp")).endpoints
        XCTAssertEqual(e.deviceAuthorization, "https://login.example.com/device")
        XCTAssertEqual(e.revocation, "https://login.example.com/revoke")
        XCTAssertEqual(e.userinfo, "http://127.0.0.1:8080/userinfo")
        XCTAssertEqual(e.endSession, "https://login.example.com/logout")
        XCTAssertEqual(e.introspection, "https://login.example.com/introspect")
        // A URL that is not https is refused: EndpointKeyRefusalTests.
    }

    func testConfiguredEndpointsFillAndOverrideDiscovery() {
        var endpoints = ConfiguredEndpoints()
        endpoints.deviceAuthorization = "https://idp/device"
        endpoints.userinfo = "https://idp/v2/userinfo"
        let discovered = ProviderMetadata(issuer: "https://idp", tokenEndpoint: "https://idp/token",
                                          revocationEndpoint: "https://idp/revoke", userinfoEndpoint: "https://idp/userinfo")
        let m = endpoints.applied(to: discovered)
        XCTAssertEqual(m.deviceAuthorizationEndpoint, "https://idp/device")
        XCTAssertEqual(m.userinfoEndpoint, "https://idp/v2/userinfo")
        XCTAssertEqual(m.revocationEndpoint, "https://idp/revoke")
        XCTAssertNil(m.introspectionEndpoint)
    }

    func testDiscoveryIsReadAgainWhenADayOldAndSharedByConcurrentCallers() async throws {
        let transport = CountingDiscovery()
        let now = Mutex<Double>(1_000_000)
        let clock = WallClock { now.withLock { $0 } }
        var config = ProviderConfig(name: "corp", issuer: "https://idp.example", clientID: "c")
        config.endpoints.revocation = "https://idp.example/revoke"
        let provider = Provider(config: config, transport: transport, clock: clock)

        async let a = provider.discovered()
        async let b = provider.discovered()
        let (first, second) = try await (a, b)
        XCTAssertEqual(first, second)
        XCTAssertEqual(first.revocationEndpoint, "https://idp.example/revoke")
        XCTAssertEqual(transport.count, 1)

        now.withLock { $0 += 3600 }
        _ = try await provider.discovered()
        XCTAssertEqual(transport.count, 1, "an hour-old document is kept")
        now.withLock { $0 += 86_400 }
        _ = try await provider.discovered()
        XCTAssertEqual(transport.count, 2, "a day-old document is read again")

        // An endpoint that answers 404 makes the next caller read it again.
        let failure = await provider.failed(.endpointNotFound("the provider's token endpoint answered HTTP 404 (not found)"), doing: "token refresh")
        XCTAssertTrue(failure.message.contains("discovery document again"), failure.message)
        _ = try await provider.discovered()
        XCTAssertEqual(transport.count, 3)
        // Still 404 with the document read again: backed off, not read at every request.
        let again = await provider.failed(.endpointNotFound("the provider's token endpoint answered HTTP 404 (not found)"), doing: "token refresh")
        guard case .providerUnreachable(_, let retryAfter, _) = again else { return XCTFail("\(again)") }
        XCTAssertEqual(retryAfter, 1)
        do {
            _ = try await provider.discovered()
            XCTFail("asked during the back-off")
        } catch {
            XCTAssertEqual(transport.count, 3)
        }
        now.withLock { $0 += 2 }
        _ = try await provider.discovered()
        XCTAssertEqual(transport.count, 4)
        // A request that succeeds ends it: the next 404 reads the document at once again.
        await provider.succeeded()
        let fresh = await provider.failed(.endpointNotFound("the provider's token endpoint answered HTTP 404 (not found)"), doing: "token refresh")
        guard case .providerUnreachable(_, 0, _) = fresh else { return XCTFail("\(fresh)") }
    }

    func testDisplayNameIsTheUsernameElseTheSubjectAtTheIssuersHost() {
        var account = Account(key: AccountKey(provider: "corp", subject: "1"), issuer: "https://login.example.com:8443/realms/x",
                              clientID: "c", username: nil, refreshToken: "rt", idToken: nil, state: .ready)
        XCTAssertEqual(account.displayName, "1@login.example.com")
        XCTAssertTrue(account.isNamed("1") && account.isNamed("1@login.example.com"))
        account.username = "kim"
        XCTAssertEqual(account.displayName, "kim")
        XCTAssertTrue(account.isNamed("kim") && account.isNamed("1"))
        XCTAssertEqual(Account.host(of: "http://[::1]:9000"), "::1")
        XCTAssertEqual(Account.host(of: "https://idp.example"), "idp.example")
    }
}

/// Answers every request with the same discovery document and counts them.
private final class CountingDiscovery: HTTPTransport {
    private let requests = Atomic<Int>(0)

    var count: Int { requests.load(ordering: .relaxed) }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        requests.wrappingAdd(1, ordering: .relaxed)
        // Long enough for a second caller to arrive while the first fetch is in flight.
        try? await Task.sleep(for: .milliseconds(50))
        let doc = #"{"issuer":"https://idp.example","token_endpoint":"https://idp.example/token","revocation_endpoint":"https://idp.example/old-revoke"}"#
        return HTTPResponse(status: 200, body: Array(doc.utf8))
    }
}
