import OAuth
import XCTest

/// Resource-first discovery: the resource's metadata (RFC 9728), then its authorization
/// server's (RFC 8414, OpenID Connect discovery).
final class ResourceDiscoveryTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    private var discovery: ResourceDiscovery { ResourceDiscovery(transport: NetworkTransport(timeout: 5)) }
    private var resource: String { stub.baseURL + "/api" }
    private let wellKnown = "/.well-known/oauth-protected-resource/api"

    private func resourceDocument(resource: String? = nil, servers: String? = nil, extra: String = "") -> StubAnswer {
        .json(#"{"resource":"\#(resource ?? self.resource)","authorization_servers":\#(servers ?? #"["\#(stub.baseURL)/tenant"]"#)\#(extra)}"#)
    }

    private func serverDocument(issuer: String, extra: String = "") -> StubAnswer {
        .json(#"{"issuer":"\#(issuer)","token_endpoint":"\#(stub.baseURL)/token","authorization_endpoint":"\#(stub.baseURL)/authorize"\#(extra)}"#)
    }

    /// The resource metadata's error, which must be `.configuration` or `.invalidResponse`
    /// (per `configuration`) and start by naming where it came from.
    private func refusal(_ answer: StubAnswer, configuration: Bool, file: StaticString = #filePath,
                         line: UInt = #line) async -> String {
        stub.route(wellKnown, answer)
        let error = await expectError({ try await discovery.protectedResourceMetadata(for: resource, metadataURL: nil) },
                                      file: file, line: line)
        let message: String
        switch error {
        case .configuration(let m)? where configuration: message = m
        case .invalidResponse(let m)? where !configuration: message = m
        default: XCTFail("got \(String(describing: error))", file: file, line: line); return ""
        }
        XCTAssertTrue(message.hasPrefix("the resource metadata at \(stub.baseURL)\(wellKnown) "), message, file: file, line: line)
        return message
    }

    // MARK: URLs

    func testWellKnownURLs() throws {
        let cases = [
            ("https://api.example/v1/mcp", "https://api.example/.well-known/oauth-protected-resource/v1/mcp"),
            ("https://api.example", "https://api.example/.well-known/oauth-protected-resource"),
            ("https://api.example/", "https://api.example/.well-known/oauth-protected-resource"),
            ("https://api.example:8443/v1/", "https://api.example:8443/.well-known/oauth-protected-resource/v1/"),
            ("https://api.example/v1?tenant=a", "https://api.example/.well-known/oauth-protected-resource/v1?tenant=a"),
            ("https://api.example?tenant=a", "https://api.example/.well-known/oauth-protected-resource?tenant=a"),
            ("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"),
        ]
        for (resource, expected) in cases {
            XCTAssertEqual(try ResourceURL.wellKnownMetadataURL(for: resource), expected, resource)
        }
    }

    func testOriginAndHost() {
        XCTAssertEqual(ResourceURL.origin(of: "https://API.example:443/x?y"), "https://api.example")
        XCTAssertEqual(ResourceURL.origin(of: "https://api.example:8443/x"), "https://api.example:8443")
        XCTAssertEqual(ResourceURL.origin(of: "http://[::1]:80/"), "http://[::1]")
        XCTAssertEqual(ResourceURL.host(of: "https://api.example:8443/x"), "api.example")
        XCTAssertNil(ResourceURL.origin(of: "api.example/x"))
        XCTAssertNil(ResourceURL.host(of: "ftp://api.example/"))
    }

    func testResourcesThatCannotBeUsedAreRefusedWithWhatToChange() {
        let cases = [
            ("https://api.example/v1#part", "fragment"), ("https://user:pw@api.example/v1", "user name or password"),
            ("http://api.example/v1", "must use https"), ("api.example/v1", "the resource api.example/v1"),
            ("ftp://api.example/", "must use https"),
        ]
        for (resource, said) in cases {
            do {
                try ResourceURL.check(resource)
                XCTFail("\(resource) was let through")
            } catch {
                guard case .configuration(let message) = error else { XCTFail("\(resource): got \(error)"); continue }
                XCTAssertTrue(message.contains(said), message)
                XCTAssertFalse(message.contains("pw"), message)
            }
        }
        XCTAssertNoThrow(try ResourceURL.check("http://localhost:3000/mcp"))
    }

    // MARK: Resource metadata

    func testResourceMetadataIsReadFromTheWellKnownURL() async throws {
        stub.route(wellKnown, resourceDocument(extra: #","scopes_supported":["read"],"resource_name":"Files","dpop_bound_access_tokens_required":true,"dpop_signing_alg_values_supported":["ES256"],"other":{"a":1}"#))
        let fetched = try await discovery.protectedResourceMetadata(for: resource, metadataURL: nil)
        XCTAssertEqual(fetched.value, ProtectedResourceMetadata(
            resource: resource, authorizationServers: [stub.baseURL + "/tenant"], scopesSupported: ["read"], resourceName: "Files",
            dpopBoundAccessTokensRequired: true, dpopSigningAlgValuesSupported: ["ES256"]))
        XCTAssertNil(fetched.maxAge)
        XCTAssertEqual(stub.requests.map(\.path), [wellKnown])
        XCTAssertEqual(stub.requests.first?.method, "GET")
    }

    func testTheMetadataURLOfAChallengeIsUsedInstead() async throws {
        var answer = resourceDocument()
        answer.headers["Cache-Control"] = "public, max-age=300"
        stub.route("/meta/files", answer)
        let fetched = try await discovery.protectedResourceMetadata(for: resource, metadataURL: stub.baseURL + "/meta/files")
        XCTAssertEqual(fetched.value.authorizationServers, [stub.baseURL + "/tenant"])
        XCTAssertEqual(fetched.maxAge, 300)
        XCTAssertEqual(stub.requests.map(\.path), ["/meta/files"])
    }

    func testAResourceOrMetadataURLThatCannotBeUsedIsRefusedWithoutARequest() async {
        let discovery = ResourceDiscovery(transport: NoNetworkTransport())
        let plain = await expectError {
            try await discovery.protectedResourceMetadata(for: "https://api.example/v1", metadataURL: "http://evil.example/meta")
        }
        guard case .configuration(let message)? = plain else { return XCTFail("got \(String(describing: plain))") }
        XCTAssertTrue(message.contains("resource_metadata URL given for https://api.example/v1"), message)
        XCTAssertTrue(message.contains("http://evil.example/meta must use https"), message)
        let fragment = await expectError { try await discovery.protectedResourceMetadata(for: "https://api.example/#x", metadataURL: nil) }
        guard case .configuration(let said)? = fragment else { return XCTFail("got \(String(describing: fragment))") }
        XCTAssertTrue(said.contains("fragment"), said)
    }

    func testARedirectIsRefusedAndNamesWhereTo() async {
        let away = await refusal(StubAnswer(status: 302, headers: ["Location": "https://evil.example/meta?x=1"]), configuration: true)
        XCTAssertTrue(away.contains("redirected to https://evil.example/meta; authbroker does not follow redirects for metadata"), away)
        let near = await refusal(StubAnswer(status: 301, headers: ["Location": "/elsewhere"]), configuration: true)
        XCTAssertTrue(near.contains("redirected to \(stub.baseURL)/elsewhere;"), near)
    }

    func testStatusesOtherThan200AreRefused() async {
        let missing = await refusal(.empty(status: 404), configuration: true)
        XCTAssertTrue(missing.contains("HTTP 404") && missing.contains("publishes no resource metadata") && missing.contains(resource), missing)
        let broken = await refusal(.text("oops", status: 500), configuration: false)
        XCTAssertTrue(broken.hasSuffix("answered HTTP 500"), broken)
        stub.route(wellKnown, StubAnswer(status: 429, headers: ["Retry-After": "7"]))
        let busy = await expectError { try await discovery.protectedResourceMetadata(for: resource, metadataURL: nil) }
        XCTAssertEqual(busy, .busy("the resource metadata at \(stub.baseURL)\(wellKnown) answered HTTP 429 (too many requests)",
                                   retryAfter: .seconds(7)))
    }

    func testABodyOver64KiBIsRefused() async {
        let padding = String(repeating: " ", count: 64 << 10)
        let message = await refusal(.json(#"{"resource":"\#(resource)",\#(padding)"authorization_servers":["\#(stub.baseURL)"]}"#),
                                    configuration: false)
        XCTAssertTrue(message.contains("larger than 64 KiB"), message)
    }

    func testGarbageAndWrongTypesAreNamed() async {
        let garbage = await refusal(.text("<html>hello</html>"), configuration: false)
        XCTAssertTrue(garbage.contains("not a JSON object"), garbage)
        let cases = [
            ("authorization_servers", #""authorization_servers":"https://as.example""#, "a list of strings"),
            ("dpop_bound_access_tokens_required", #""authorization_servers":[],"dpop_bound_access_tokens_required":"yes""#, "true or false"),
            ("scopes_supported", #""authorization_servers":[],"scopes_supported":["a",1]"#, "a list of strings"),
            ("resource_name", #""authorization_servers":[],"resource_name":7"#, "a string"),
        ]
        for (member, text, expected) in cases {
            let message = await refusal(.json(#"{"resource":"\#(resource)",\#(text)}"#), configuration: false)
            XCTAssertTrue(message.contains("its \(member) is not \(expected)"), message)
        }
        let noResource = await refusal(.json(#"{"authorization_servers":["https://as.example"]}"#), configuration: false)
        XCTAssertTrue(noResource.hasSuffix("has no resource"), noResource)
    }

    func testMetadataForAnotherResourceIsRefusedNamingBoth() async {
        let message = await refusal(resourceDocument(resource: "https://other.example/api"), configuration: true)
        XCTAssertTrue(message.contains("for the resource https://other.example/api, not \(resource) as asked"), message)
        XCTAssertTrue(message.contains("RFC 9728 §3.3"), message)
        let slash = await refusal(resourceDocument(resource: resource + "/"), configuration: true)
        XCTAssertTrue(slash.contains("\(resource)/, not \(resource) as asked"), slash)
    }

    func testNoAuthorizationServerIsRefused() async {
        for servers in ["[]", "null"] {
            let message = await refusal(resourceDocument(servers: servers), configuration: true)
            XCTAssertTrue(message.contains("names no authorization server"), message)
        }
        let missing = await refusal(.json(#"{"resource":"\#(resource)"}"#), configuration: true)
        XCTAssertTrue(missing.contains("names no authorization server"), missing)
    }

    func testAnAuthorizationServerThatCannotBeUsedIsRefused() async {
        let plain = await refusal(resourceDocument(servers: #"["\#(stub.baseURL)","http://as.example"]"#), configuration: true)
        XCTAssertTrue(plain.contains("names an authorization server authbroker cannot use: the authorization server http://as.example must use https"), plain)
        let query = await refusal(resourceDocument(servers: #"["https://as.example?tenant=a"]"#), configuration: true)
        XCTAssertTrue(query.contains("must not have a query"), query)
    }

    func testCacheControl() {
        XCTAssertNil(CacheControl.maxAge(nil))
        XCTAssertNil(CacheControl.maxAge("public"))
        XCTAssertEqual(CacheControl.maxAge("max-age=3600"), 3600)
        XCTAssertEqual(CacheControl.maxAge("public, MAX-AGE=\"60\" , must-revalidate"), 60)
        XCTAssertEqual(CacheControl.maxAge("max-age=600, no-cache"), 0)
        XCTAssertEqual(CacheControl.maxAge("no-store"), 0)
        XCTAssertEqual(CacheControl.maxAge("max-age=abc"), 0)
        XCTAssertEqual(CacheControl.maxAge("max-age=-5"), 0)
        XCTAssertEqual(CacheControl.maxAge("max-age=90, max-age=30"), 30)
        XCTAssertEqual(CacheControl.maxAge("max-age=99999999999999999999999"), ProviderAnswer.longestLifetime)
        XCTAssertEqual(CacheControl.maxAge("s-maxage=10"), nil)
    }

    // MARK: Authorization server metadata

    func testRFC8414ComesFirst() async throws {
        var answer = serverDocument(issuer: stub.baseURL + "/tenant", extra: #","registration_endpoint":"\#(stub.baseURL)/register","scopes_supported":["openid"],"client_id_metadata_document_supported":true"#)
        answer.headers["Cache-Control"] = "max-age=120"
        stub.route("/.well-known/oauth-authorization-server/tenant", answer)
        let fetched = try await discovery.authorizationServerMetadata(issuer: stub.baseURL + "/tenant")
        XCTAssertEqual(fetched.value.registrationEndpoint, stub.baseURL + "/register")
        XCTAssertEqual(fetched.value.scopesSupported, ["openid"])
        XCTAssertEqual(fetched.value.clientIDMetadataDocumentSupported, true)
        XCTAssertEqual(fetched.maxAge, 120)
        XCTAssertEqual(stub.requests.map(\.path), ["/.well-known/oauth-authorization-server/tenant"])
    }

    func testOpenIDDiscoveryIsTriedInTurnWhenNotFound() async throws {
        stub.route("/.well-known/openid-configuration/tenant", .empty(status: 405))
        stub.route("/tenant/.well-known/openid-configuration", serverDocument(issuer: stub.baseURL + "/tenant/"))
        let fetched = try await discovery.authorizationServerMetadata(issuer: stub.baseURL + "/tenant/")
        XCTAssertEqual(fetched.value.tokenEndpoint, stub.baseURL + "/token")
        XCTAssertEqual(stub.requests.map(\.path), ["/.well-known/oauth-authorization-server/tenant",
                                                   "/.well-known/openid-configuration/tenant",
                                                   "/tenant/.well-known/openid-configuration"])
    }

    func testAnIssuerWithoutPathHasTwoPlacesAndNamesThemWhenBothAreMissing() async {
        stub.route("/.well-known/openid-configuration", .empty(status: 400))
        let error = await expectError { try await discovery.authorizationServerMetadata(issuer: stub.baseURL) }
        XCTAssertEqual(stub.requests.map(\.path), ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"])
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.hasPrefix("the authorization server \(stub.baseURL) publishes no metadata"), message)
        XCTAssertTrue(message.contains("\(stub.baseURL)/.well-known/oauth-authorization-server (HTTP 404)"), message)
        XCTAssertTrue(message.contains("\(stub.baseURL)/.well-known/openid-configuration (HTTP 400)"), message)
    }

    func testAServerErrorStopsTheSearch() async {
        stub.route("/.well-known/oauth-authorization-server", .text("oops", status: 502))
        stub.route("/.well-known/openid-configuration", serverDocument(issuer: stub.baseURL))
        let error = await expectError { try await discovery.authorizationServerMetadata(issuer: stub.baseURL) }
        XCTAssertEqual(error, .invalidResponse("the authorization server metadata at \(stub.baseURL)/.well-known/oauth-authorization-server answered HTTP 502"))
        XCTAssertEqual(stub.requests.count, 1)
        let unreachable = try? StubProvider.closedPort()
        let gone = await expectError {
            try await discovery.authorizationServerMetadata(issuer: "http://127.0.0.1:\(unreachable ?? 1)")
        }
        guard case .unreachable? = gone else { return XCTFail("got \(String(describing: gone))") }
    }

    func testAnIssuerMixUpIsRefusedNamingBoth() async {
        stub.route("/.well-known/oauth-authorization-server/tenant", serverDocument(issuer: "https://evil.example/tenant"))
        stub.route("/.well-known/openid-configuration/tenant", serverDocument(issuer: stub.baseURL + "/tenant"))
        let error = await expectError { try await discovery.authorizationServerMetadata(issuer: stub.baseURL + "/tenant") }
        XCTAssertEqual(error, .configuration("the authorization server metadata at \(stub.baseURL)/.well-known/oauth-authorization-server/tenant names the issuer https://evil.example/tenant, not \(stub.baseURL)/tenant as asked; they must be identical"))
        XCTAssertEqual(stub.requests.count, 1, "a document for another issuer ends the search")
    }

    func testServerEndpointsFollowTheHTTPSRule() async {
        stub.route("/.well-known/oauth-authorization-server", serverDocument(issuer: stub.baseURL, extra: #","registration_endpoint":"http://as.example/register""#))
        let error = await expectError { try await discovery.authorizationServerMetadata(issuer: stub.baseURL) }
        guard case .configuration(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("registration_endpoint http://as.example/register must use https"), message)
        let plain = await expectError {
            try await ResourceDiscovery(transport: NoNetworkTransport()).authorizationServerMetadata(issuer: "http://as.example")
        }
        guard case .configuration(let said)? = plain else { return XCTFail("got \(String(describing: plain))") }
        XCTAssertTrue(said.contains("must use https"), said)
    }

    func testAWrongTypeIsNamed() async {
        stub.route("/.well-known/oauth-authorization-server", serverDocument(issuer: stub.baseURL, extra: #","client_id_metadata_document_supported":"yes""#))
        let error = await expectError { try await discovery.authorizationServerMetadata(issuer: stub.baseURL) }
        guard case .invalidResponse(let message)? = error else { return XCTFail("got \(String(describing: error))") }
        XCTAssertTrue(message.contains("its client_id_metadata_document_supported is not true or false"), message)
    }

    /// A provider found through a resource may publish only RFC 8414, which `discover()`
    /// does not read.
    func testTheClientDiscoversAServerWithOnlyRFC8414() async throws {
        stub.route("/.well-known/oauth-authorization-server", serverDocument(issuer: stub.baseURL))
        let client = stubClient(stub)
        let discovered = await expectError { try await client.discover() }
        guard case .invalidResponse? = discovered else { return XCTFail("got \(String(describing: discovered))") }
        let metadata = try await client.discoverAuthorizationServer()
        XCTAssertEqual(metadata.authorizationEndpoint, stub.baseURL + "/authorize")
    }
}
