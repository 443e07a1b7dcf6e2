@testable import BrokerCore
import BrokerProtocol
import Foundation
import OAuth
import SecretStore
import XCTest

/// Resource-first discovery (RFC 9728 → RFC 8414 → RFC 7591), through a `Broker` built
/// over the STUB resource and authorization server (`StubResourceServer`) and a
/// `MemoryStore`: what is sent to whom, what the user is told, and what is kept.
final class DiscoveryTests: XCTestCase {
    typealias Stub = StubResourceServer
    let resource = Stub.resource
    let issuer = Stub.issuer

    /// A broker whose config.toml has `discovery` under `[discovery]` and `providers` (none
    /// by default), over `server` and `store`, started.
    func broker(discovery: String = #"mode = "ask""#, providers: String = "", server: Stub,
                store: MemoryStore = MemoryStore()) async throws -> Broker {
        let config = try ConfigLoader.parse("""
            [daemon]
            store = "memory"

            [discovery]
            \(discovery)

            \(providers)
            """, file: "config.toml")
        let broker = Broker(config: config, store: store, transport: server, socketPath: "/nonexistent/socket",
                            clock: TestClock().wallClock, logger: LogLines().logger, storeRetryInterval: .milliseconds(20))
        await broker.start()
        return broker
    }

    /// The error `work` throws, or nil (a test failure) when it succeeds.
    func refusal<T>(_ work: () async throws(BrokerError) -> T, file: StaticString = #filePath, line: UInt = #line) async -> BrokerError? {
        do {
            let value = try await work()
            XCTFail("expected a refusal, got \(value)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    /// The store's items that hold providers found by discovery, once the (background) save
    /// has happened.
    func discoveredItems(in store: MemoryStore, count: Int = 1) async throws -> [StoredCredential] {
        for _ in 0..<200 {
            let items = try await store.loadAll().filter { DiscoveredProviderItem.provider(from: $0) != nil }
            if items.count >= count { return items }
            try await Task.sleep(for: .milliseconds(5))
        }
        return try await store.loadAll().filter { DiscoveredProviderItem.provider(from: $0) != nil }
    }

    func account(provider: String, issuer: String, clientID: String) -> Account {
        Account(key: AccountKey(provider: provider, subject: "sub-bob"), issuer: issuer, clientID: clientID,
                username: "bob", refreshToken: "refresh-bob", idToken: nil, state: .ready)
    }

    // MARK: 1. ask: nothing is sent to an untrusted server

    func testAnUntrustedServerIsOnlyNamedAndTheTokenRequestSaysHowToTrustIt() async throws {
        let server = Stub()
        let broker = try await broker(server: server)

        let found = try await broker.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertFalse(found.trusted)
        XCTAssertFalse(found.configured)
        XCTAssertFalse(found.signedIn)
        XCTAssertEqual(found.resourceHost, "mcp.example")
        XCTAssertEqual(found.issuerHost, "as.example")
        XCTAssertEqual(found.issuer, issuer)
        XCTAssertEqual(found.provider, "as.example", "the name it would get")

        let error = await refusal { () async throws(BrokerError) in try await broker.tokens.token(TokenGetParams(resource: resource)) }
        guard case .untrustedServer(let r, let i, let p, let rh, let ih, _) = error else { return XCTFail("\(String(describing: error))") }
        XCTAssertEqual([r, i, p, rh, ih], [resource, issuer, "as.example", "mcp.example", "as.example"])
        XCTAssertEqual(error?.message, "mcp.example sends its users to sign in at as.example, which you have not trusted yet: run `authctl login --resource https://mcp.example/mcp` to review it and sign in")

        XCTAssertEqual(server.hosts, ["mcp.example"], "nothing reached the authorization server: \(server.requests)")
        XCTAssertEqual(server.requests, ["GET \(Stub.resourceMetadataURL)"], "the resource's metadata once (then cached)")
        XCTAssertTrue(server.registrations.isEmpty)
        XCTAssertNil(broker.providers.config.provider(named: "as.example"))
    }

    // MARK: 2. discovery.trust registers a native public client

    func testTrustingTheServerRegistersANativeClientAndMakesItAProviderToSignInTo() async throws {
        let server = Stub()
        let broker = try await broker(server: server)

        let trusted = try await broker.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        XCTAssertEqual(trusted, DiscoveryTrustResult(provider: "as.example", trusted: true, client: "registered"))

        XCTAssertTrue(server.requests.contains("GET \(Stub.oauthMetadataURL)"), "\(server.requests)")
        XCTAssertEqual(server.registrations.count, 1)
        let sent = try XCTUnwrap(server.registrations.first)
        XCTAssertEqual(sent["application_type"] as? String, "native")
        XCTAssertEqual(sent["token_endpoint_auth_method"] as? String, "none")
        XCTAssertEqual(sent["grant_types"] as? [String], ["authorization_code", "refresh_token"], "no device grant: the server has no device endpoint")
        XCTAssertEqual(sent["response_types"] as? [String], ["code"])
        let uris = try XCTUnwrap(sent["redirect_uris"] as? [String])
        XCTAssertEqual(uris.count, 1)
        let port = try XCTUnwrap(Enrolment.loopbackPort(uris[0]), uris[0])
        XCTAssertEqual(uris[0], "http://127.0.0.1:\(port)/callback")
        XCTAssertTrue((1...65535).contains(port), "a real port: \(port)")

        let p = try XCTUnwrap(broker.providers.config.provider(named: "as.example"), "\(broker.providers.config.providers.map(\.name))")
        XCTAssertEqual(p.issuer, issuer)
        XCTAssertEqual(p.clientID, "client-1")
        XCTAssertNil(p.clientSecret)
        XCTAssertEqual(p.redirectPort, port, "sign-ins listen where the server was told")
        XCTAssertEqual(p.resources, [resource])
        XCTAssertEqual(p.discovered?.client, .registered)
        XCTAssertEqual(broker.status.status().providers.map(\.name), ["as.example"])
        XCTAssertEqual(broker.status.status().providers.first?.clientID, "client-1")

        let error = await refusal { () async throws(BrokerError) in try await broker.tokens.token(TokenGetParams(resource: resource)) }
        XCTAssertEqual(error, .loginRequired(provider: "as.example", message: "not signed in to as.example: run `authctl login --provider as.example`"))
        XCTAssertEqual(server.registrations.count, 1, "token.get registers nothing more")
    }

    func testAServerThatPublishesOnlyOpenIDDiscoveryIsEnrolledToo() async throws {
        let server = Stub()
        server.publish(.openID)
        let broker = try await broker(server: server)

        let trusted = try await broker.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        XCTAssertEqual(trusted.provider, "as.example")
        XCTAssertEqual(Array(server.requests.filter { $0.hasPrefix("GET https://as.example") }),
                       ["GET \(Stub.oauthMetadataURL)", "GET \(Stub.openIDMetadataURL)"], "RFC 8414 first, then OpenID discovery")
        XCTAssertEqual(server.registrations.count, 1)
    }

    // MARK: 3. trusted_issuers

    func testAnIssuerInTrustedIssuersIsEnrolledWithoutAsking() async throws {
        let server = Stub()
        let broker = try await broker(discovery: #"trusted_issuers = ["https://as.example"]"#, server: server)

        let found = try await broker.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertTrue(found.trusted)
        XCTAssertEqual(found.provider, "as.example")
        XCTAssertEqual(server.registrations.count, 1)
        XCTAssertNotNil(broker.providers.config.provider(named: "as.example"))
    }

    func testATrustedIssuerPrefixEnrolsAnIssuerUnderItWithoutAsking() async throws {
        let server = Stub(issuer: "https://as.example/tenant")
        let broker = try await broker(discovery: #"trusted_issuers = ["https://as.example/"]"#, server: server)

        let found = try await broker.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertTrue(found.trusted)
        XCTAssertEqual(found.issuer, "https://as.example/tenant")
        XCTAssertEqual(found.provider, "as.example")
        XCTAssertTrue(server.requests.contains("GET https://as.example/.well-known/oauth-authorization-server/tenant"), "\(server.requests)")
        XCTAssertEqual(server.registrations.count, 1)
        XCTAssertEqual(broker.providers.config.provider(named: "as.example")?.issuer, "https://as.example/tenant")
    }

    func testATrustedIssuerPrefixMatchesOnlyIssuersUnderItOnItsHost() {
        let settings = DiscoverySettings(trustedIssuers: ["https://as.example/"])
        XCTAssertTrue(settings.trusts("https://as.example/tenant"))
        XCTAssertFalse(settings.trusts("https://as.example"), "docs/configuration.md: the issuer without the slash is listed exactly")
        XCTAssertFalse(settings.trusts("https://as.example.evil"))
        XCTAssertFalse(settings.trusts("https://as.example.evil/tenant"))
        XCTAssertFalse(settings.trusts("https://as.example:8443/tenant"))
        XCTAssertFalse(DiscoverySettings(trustedIssuers: ["https://as.example"]).trusts("https://as.example.evil"),
                       "an exact entry is no prefix")
    }

    func testATrustedIssuerPrefixDoesNotTrustAnotherHostThatStartsTheSame() async throws {
        let server = Stub()
        server.nameServers(["https://as.example.evil"])
        let broker = try await broker(discovery: #"trusted_issuers = ["https://as.example/"]"#, server: server)

        let found = try await broker.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertFalse(found.trusted)
        XCTAssertEqual(found.issuerHost, "as.example.evil")
        XCTAssertEqual(server.hosts, ["mcp.example"], "nothing sent to as.example.evil: \(server.requests)")
    }

    // MARK: 4. mode = "off"

    func testModeOffRefusesAResourceNoProviderListsAndSaysWhatToDo() async throws {
        let server = Stub()
        let broker = try await broker(discovery: #"mode = "off""#, providers: """
            [providers.corp]
            issuer = "https://idp.example"
            client_id = "authbroker"
            resources = ["https://api"]
            """, server: server)

        let resolved = await refusal { () async throws(BrokerError) in
            try await broker.discovery.resolve(DiscoveryResolveParams(resource: self.resource))
        }
        XCTAssertEqual(resolved, .configuration(provider: nil, message: "no configured provider lists https://mcp.example/mcp, and [discovery] mode = \"off\" in config.toml: add it to the resources of its provider there, or set mode = \"ask\""))

        let token = await refusal { () async throws(BrokerError) in try await broker.tokens.token(TokenGetParams(resource: resource)) }
        XCTAssertEqual(token, .invalidRequest(message: "resource is not one of the resources of [providers.corp] in config.toml, and [discovery] mode = \"off\": add it there (and sign in again), or set any_resource = true there"))
        XCTAssertTrue(server.requests.isEmpty, "nothing is fetched: \(server.requests)")
    }

    func testModeOffRefusesAProviderDiscoveredBeforeTheRestart() async throws {
        let store = MemoryStore()
        let first = try await broker(server: Stub(), store: store)
        let trusted = try await first.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        _ = try await discoveredItems(in: store)
        try await store.save(AccountSecret.credential(for: account(provider: trusted.provider, issuer: issuer, clientID: "client-1")))

        let server = Stub()
        let off = try await broker(discovery: #"mode = "off""#, providers: """
            [providers.corp]
            issuer = "https://idp.example"
            client_id = "authbroker"
            """, server: server, store: store)
        XCTAssertNil(off.tokens.cachedToken(TokenGetParams(resource: resource)), "no cache hit for a discovered provider under mode = \"off\"")
        let error = await refusal { () async throws(BrokerError) in try await off.tokens.token(TokenGetParams(resource: resource)) }
        XCTAssertEqual(error, .configuration(provider: nil, message: "no configured provider lists https://mcp.example/mcp, and [discovery] mode = \"off\" in config.toml: add it to the resources of its provider there, or set mode = \"ask\""))
        XCTAssertTrue(server.requests.isEmpty, "\(server.requests)")
    }

    // MARK: 5. The registration's answer wins

    func testTheSecretAndAuthMethodTheServerAnsweredAreWhatTheProviderUses() async throws {
        let server = Stub()
        server.answerAlways(.registered(clientID: "client-conf", secret: "s3cret", authMethod: "client_secret_basic"))
        let broker = try await broker(server: server)

        let trusted = try await broker.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        let p = try XCTUnwrap(broker.providers.config.provider(named: trusted.provider))
        XCTAssertEqual(p.clientID, "client-conf")
        XCTAssertEqual(p.clientSecret, "s3cret")
        XCTAssertEqual(p.discovered?.tokenEndpointAuthMethod, "client_secret_basic")

        // The token request authenticates as the server said.
        broker.accounts.put(account(provider: p.name, issuer: issuer, clientID: "client-conf"))
        _ = try await broker.tokens.token(TokenGetParams(resource: resource))
        let sent = try XCTUnwrap(server.tokenRequests.first)
        let basic = "Basic " + Data("client-conf:s3cret".utf8).base64EncodedString()
        XCTAssertEqual(sent.authorization, basic)
        XCTAssertNil(sent.form["client_secret"])
    }

    func testAServerThatRefusesTheDeviceGrantIsAskedOnceMoreWithoutIt() async throws {
        let server = Stub()
        server.addMetadata(#","device_authorization_endpoint":"https://as.example/device""#)
        server.script(.refused("invalid_client_metadata", "grant_types: unknown grant type"))
        let broker = try await broker(server: server)

        let trusted = try await broker.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        XCTAssertEqual(trusted.provider, "as.example")
        let grants = server.registrations.map { $0["grant_types"] as? [String] ?? [] }
        XCTAssertEqual(grants, [["authorization_code", "refresh_token", Enrolment.deviceGrant], ["authorization_code", "refresh_token"]])
        XCTAssertEqual(broker.providers.config.provider(named: "as.example")?.clientID, "client-1")
    }

    // MARK: 6. Refusals say who refused and what to do

    func testARefusedRegistrationNamesTheServerWhatItSaidAndTheWayOut() async throws {
        let server = Stub()
        server.answerAlways(.refused("invalid_client_metadata", "redirect_uris must use https"))
        let broker = try await broker(server: server)

        let error = await refusal { () async throws(BrokerError) in
            try await broker.discovery.trust(DiscoveryTrustParams(resource: self.resource, issuer: self.issuer))
        }
        XCTAssertEqual(error, .providerError(provider: "as.example", oauthError: "invalid_client_metadata", message: "as.example answered registering authbroker as a client with an error (invalid_client_metadata: the registration endpoint at https://as.example/register refused the registration: redirect_uris must use https): register a client for authbroker there by hand and add it to config.toml as [providers.NAME] with issuer = \"https://as.example\""))
        XCTAssertEqual(server.registrations.count, 1, "no retry without a device endpoint")
        XCTAssertNil(broker.providers.config.provider(named: "as.example"))
    }

    func testARegistrationAnsweredWithGarbageNamesTheServer() async throws {
        let server = Stub()
        server.answerAlways(.raw(200, "<html>Welcome</html>"))
        let broker = try await broker(server: server)

        let error = await refusal { () async throws(BrokerError) in
            try await broker.discovery.trust(DiscoveryTrustParams(resource: self.resource, issuer: self.issuer))
        }
        XCTAssertEqual(error, .providerUnreachable(provider: "as.example", retryAfter: 1, message: "as.example answered nonsense while registering authbroker as a client: the registration endpoint at https://as.example/register answered something that is not a JSON object; if it goes on, tell its administrators, or register a client there by hand and add it to config.toml"))
        XCTAssertNil(broker.providers.config.provider(named: "as.example"))
    }

    // MARK: 7. Metadata for something else

    func testMetadataForAnotherResourceIsRefusedNamingBoth() async throws {
        let server = Stub()
        server.nameResource("https://mcp.example/other")
        let broker = try await broker(server: server)

        let error = await refusal { () async throws(BrokerError) in
            try await broker.discovery.resolve(DiscoveryResolveParams(resource: self.resource))
        }
        XCTAssertEqual(error, .invalidRequest(message: "https://mcp.example/mcp cannot be used as a resource: the resource metadata at https://mcp.example/.well-known/oauth-protected-resource/mcp is for the resource https://mcp.example/other, not https://mcp.example/mcp as asked; they must be identical (RFC 9728 §3.3), so authbroker does not use it; tell its administrators, or configure its provider in config.toml"))
        XCTAssertEqual(server.hosts, ["mcp.example"])
    }

    func testAServerWhoseMetadataNamesAnotherIssuerIsRefusedAtTrust() async throws {
        let server = Stub()
        server.nameIssuer("https://evil.example")
        let broker = try await broker(server: server)

        let error = await refusal { () async throws(BrokerError) in
            try await broker.discovery.trust(DiscoveryTrustParams(resource: self.resource, issuer: self.issuer))
        }
        XCTAssertEqual(error, .configuration(provider: "as.example", message: "as.example cannot be used: the authorization server metadata at https://as.example/.well-known/oauth-authorization-server names the issuer https://evil.example, not https://as.example as asked; they must be identical; tell its administrators, or configure its provider in config.toml by hand"))
        XCTAssertTrue(server.registrations.isEmpty, "no client registered at a server that is not who it says")
        XCTAssertNil(broker.providers.config.provider(named: "as.example"))
    }

    func testTrustingAServerTheMetadataDoesNotNameIsRefused() async throws {
        let server = Stub()
        let broker = try await broker(server: server)

        let error = await refusal { () async throws(BrokerError) in
            try await broker.discovery.trust(DiscoveryTrustParams(resource: self.resource, issuer: "https://other.example"))
        }
        XCTAssertEqual(error, .invalidRequest(message: "the metadata of https://mcp.example/mcp does not name https://other.example as its authorization server (it names https://as.example): nothing was trusted"))
        XCTAssertEqual(server.hosts, ["mcp.example"])
    }

    // MARK: 8. A configured provider's issuer

    func testAResourceWhoseServerIsAConfiguredProviderIsServedByItsAccount() async throws {
        let server = Stub()
        server.publish(.openID)  // a configured provider reads OpenID discovery
        let store = MemoryStore()
        let corp = account(provider: "corp", issuer: issuer, clientID: "authbroker")
        try await store.save(AccountSecret.credential(for: corp))
        let broker = try await broker(providers: """
            [providers.corp]
            issuer = "https://as.example"
            client_id = "authbroker"
            resources = ["https://api"]
            """, server: server, store: store)

        let token = try await broker.tokens.token(TokenGetParams(resource: resource))
        XCTAssertEqual(token.provider, "corp")
        XCTAssertEqual(token.account, "bob")
        XCTAssertEqual(server.tokenRequests.count, 1)
        XCTAssertEqual(server.tokenRequests.first?.form["refresh_token"], "refresh-bob")
        XCTAssertEqual(server.tokenRequests.first?.form["resource"], resource)
        XCTAssertTrue(server.registrations.isEmpty, "no client registered: corp has one")
        XCTAssertEqual(broker.providers.config.providers.map(\.name), ["corp"], "no provider added")
        XCTAssertTrue(broker.providers.config.provider(named: "corp")?.resources.contains(resource) ?? false)

        let found = try await broker.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertEqual(found.provider, "corp")
        XCTAssertTrue(found.configured)
        XCTAssertTrue(found.signedIn)
    }

    // MARK: 9. Kept across a restart

    func testAProviderFoundBeforeARestartIsLoadedWithItsClientAndNotRegisteredAgain() async throws {
        let store = MemoryStore()
        let first = try await broker(server: Stub(), store: store)
        _ = try await first.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        let items = try await discoveredItems(in: store)
        XCTAssertEqual(items.count, 1)
        XCTAssertEqual(items.first?.subject, "")

        let server = Stub()
        server.answerAlways(.registered(clientID: "client-2"))
        let second = try await broker(server: server, store: store)
        let p = try XCTUnwrap(second.providers.config.provider(named: "as.example"), "\(second.providers.config.providers.map(\.name))")
        XCTAssertEqual(p.clientID, "client-1")
        XCTAssertEqual(p.resources, [resource])

        let found = try await second.discovery.resolve(DiscoveryResolveParams(resource: resource))
        XCTAssertTrue(found.trusted)
        let error = await refusal { () async throws(BrokerError) in try await second.tokens.token(TokenGetParams(resource: resource)) }
        XCTAssertEqual(error, .loginRequired(provider: "as.example", message: "not signed in to as.example: run `authctl login --provider as.example`"))
        XCTAssertTrue(server.registrations.isEmpty, "no new registration: \(server.requests)")
    }

    func testASecretSetForADiscoveredProviderDoesNotLoseTheProviderAtTheRestart() async throws {
        // `authctl set-secret` stores a client secret item under the same key (provider,
        // issuer, client_id, empty subject) as the item that keeps a discovered provider.
        let store = MemoryStore()
        let first = try await broker(server: Stub(), store: store)
        _ = try await first.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        _ = try await discoveredItems(in: store)
        _ = try await first.providers.setClientSecret(SetSecretParams(provider: "as.example", clientSecret: "later"))

        let server = Stub()
        let second = try await broker(server: server, store: store)
        let p = try XCTUnwrap(second.providers.config.provider(named: "as.example"), "the discovered provider is gone after set-secret and a restart")
        XCTAssertEqual(p.clientID, "client-1")
        XCTAssertTrue(server.registrations.isEmpty)
    }

    func testAResourcesMetadataIsNotFetchedOnceTheCallersAllowanceIsSpent() async throws {
        // cache_misses_per_minute: "a caller cannot make the daemon send thousands", and a
        // caller may name any number of resources, each a request to its host.
        let server = Stub()
        let broker = try await broker(server: server)

        var error: (any Error)?
        do {
            let token = try await ProviderRequests.$allowance.withValue(RefreshQueueTests.Allowance(spent: true)) {
                try await broker.tokens.token(TokenGetParams(resource: self.resource))
            }
            XCTFail("expected a refusal, got a token \(fingerprint(token.accessToken))")
        } catch let e {
            error = e
        }
        XCTAssertEqual(error as? BrokerError, .providerRequestsSpent(limit: 1, retryAfter: 60))
        XCTAssertTrue(server.requests.isEmpty, "nothing sent on a spent allowance: \(server.requests)")
    }

    // MARK: 10. The fast path

    func testACachedTokenOfADiscoveredResourceIsAnsweredFromTheCache() async throws {
        let server = Stub()
        let broker = try await broker(server: server)
        let trusted = try await broker.discovery.trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
        broker.accounts.put(account(provider: trusted.provider, issuer: issuer, clientID: "client-1"))

        XCTAssertNil(broker.tokens.cachedToken(TokenGetParams(resource: resource)), "nothing cached yet")
        let minted = try await broker.tokens.token(TokenGetParams(resource: resource))
        XCTAssertEqual(minted.provider, "as.example")
        XCTAssertEqual(server.tokenRequests.first?.form["resource"], resource)
        XCTAssertEqual(server.tokenRequests.first?.form["client_id"], "client-1", "a public client names itself")

        let hit = try XCTUnwrap(broker.tokens.cachedToken(TokenGetParams(resource: resource)), "the fast path finds the discovered provider by the resource")
        XCTAssertEqual(fingerprint(hit.accessToken), fingerprint(minted.accessToken))
        XCTAssertEqual(server.tokenRequests.count, 1)
    }

    // MARK: 11. One registration per server

    func testTwoTrustsOfOneServerAtOnceRegisterOnce() async throws {
        let server = Stub()
        server.slowRegistrations(.milliseconds(100))
        let broker = try await broker(server: server)
        let params = DiscoveryTrustParams(resource: resource, issuer: issuer)

        async let a = broker.discovery.trust(params)
        async let b = broker.discovery.trust(params)
        let (first, second) = try await (a, b)
        XCTAssertEqual(first.provider, "as.example")
        XCTAssertEqual(second.provider, "as.example")
        XCTAssertEqual(server.registrations.count, 1)
        XCTAssertEqual(broker.providers.config.providers.map(\.name), ["as.example"])
    }
}
