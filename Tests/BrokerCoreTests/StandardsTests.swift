@testable import BrokerCore
import BrokerProtocol
import Foundation
import SecretStore
import Synchronization
import XCTest

/// What a fourth provider (idpyoidc) and LemonLDAP::NG showed of the standards, and what
/// the user is told (issue 37, item 8): `prompt=consent` with `offline_access` (OpenID
/// Connect Core §11), an `invalid_request` that comes back for the same refresh token, a
/// token type the broker can never use, a browser sign-in that never came back. The
/// provider is `StubTransport` and the loopback listener a STUB that no browser reaches
/// (a real provider's page cannot be made to stay on an error on cue).
final class StandardsTests: XCTestCase {
    /// A STUB loopback listener no redirect ever reaches: its wait ends when cancelled.
    private final class NoRedirect: RedirectListening, RedirectListener {
        let port: UInt16 = 1
        func listen(port: UInt16, screen: RedirectScreen) async throws(BrokerError) -> any RedirectListener { self }
        func redirect() async -> BrowserRedirect? {
            try? await Task.sleep(for: .seconds(3600))
            return nil
        }
        func close() async {}
    }

    /// The sign-in service over the STUB provider with `providerKeys` for `[providers.corp]`.
    private func signIns(providerKeys: String = "") async throws -> SignInService {
        let clock = TestClock()
        let transport = StubTransport()
        transport.discoveryExtra = #","authorization_endpoint":"\#(StubTransport.issuer)/authorize""#
        let logs = LogLines()
        let events = EventHub()
        let providers = ProvidersService(config: try BrokerHarness.config(providerKeys: providerKeys), transport: transport,
                                         store: MemoryStore(), clock: clock.wallClock, events: events, logger: logs.logger)
        let accounts = AccountsService(providers: providers, store: MemoryStore(), logger: logs.logger)
        await accounts.start()
        let cache = TokenCache()
        let refresher = Refresher(cache: cache, accounts: accounts, providers: providers, counters: BrokerCounters(),
                                  events: events, logger: logs.logger, clock: clock.wallClock)
        let ahead = RefreshAhead(tick: .seconds(1), refresher: refresher, providers: providers, clock: clock.wallClock,
                                 logger: logs.logger)
        return SignInService(providers: providers, accounts: accounts, tokens: TokenForgetting(cache: cache, ahead: ahead),
                             events: events, counters: BrokerCounters(), redirects: NoRedirect(), announcer: nil,
                             logger: logs.logger, clock: clock.wallClock)
    }

    /// The `prompt` values of the authorization URL a browser sign-in shows.
    private func prompts(providerKeys: String = "", params: [String: String]? = nil) async throws -> [String] {
        let service = try await signIns(providerKeys: providerKeys)
        let started = try await service.startLogin(LoginStartParams(flow: .browser, params: params))
        let url = try XCTUnwrap(started.authorizationURL)
        await service.endAll()
        let query = URLComponents(string: url)?.queryItems ?? []
        return query.filter { $0.name == "prompt" }.compactMap(\.value)
    }

    func testABrowserSignInAskingForOfflineAccessSendsPromptConsent() async throws {
        let asked = try await prompts()
        XCTAssertEqual(asked, ["consent"], "the default scopes hold offline_access (OpenID Connect Core §11)")
        let off = try await prompts(providerKeys: "consent_for_offline_access = false")
        XCTAssertEqual(off, [], "the provider's configuration says it needs none")
        let configured = try await prompts(providerKeys: #"authorization_params = { prompt = "login" }"#)
        XCTAssertEqual(configured, ["login"], "a prompt set for the provider is kept as it is")
        let caller = try await prompts(params: ["prompt": "none"])
        XCTAssertEqual(caller, ["none"], "the sign-in's own prompt wins")
        let noOffline = try await prompts(providerKeys: #"scopes = ["openid", "profile"]"#)
        XCTAssertEqual(noOffline, [], "no offline_access, no consent asked for")
        XCTAssertThrowsError(try BrokerHarness.config(providerKeys: #"consent_for_offline_access = "no""#))
    }

    func testABrowserSignInThatTimesOutSaysTheProviderMayHaveShownAnErrorPage() async throws {
        let service = try await signIns()
        let started = try await service.startLogin(LoginStartParams(flow: .browser, timeout: 1))
        do {
            _ = try await service.waitLogin(LoginWaitParams(loginID: started.loginID))
            XCTFail("the sign-in went on past its deadline")
        } catch {
            XCTAssertTrue(error.message.contains("timed out before the browser came back"), error.message)
            XCTAssertTrue(error.message.contains("corp may have shown an error page instead of sending the browser back"), error.message)
            XCTAssertTrue(error.message.contains("redirect_port"), error.message)
        }
    }

    /// LemonLDAP::NG answers `invalid_request` with no description for a session an
    /// administrator removed: the first answer says what the next one means, the second to
    /// the same refresh token turns the account `login_required` (sign-in on demand can start).
    func testASecondInvalidRequestToTheSameRefreshTokenEndsTheSignIn() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.error("invalid_request"))
        let first = await h.tokenError()
        guard case .providerError(_, "invalid_request", let message) = first else { return XCTFail("\(String(describing: first))") }
        XCTAssertTrue(message.contains("if corp answers so again, the sign-in is taken as no longer valid"), message)
        XCTAssertEqual(h.broker.accounts[AccountKey(provider: "corp", subject: "sub-alice")]?.state, .ready)

        let second = await h.tokenError()
        guard case .loginRequired(provider: "corp", _) = second else { return XCTFail("\(String(describing: second))") }
        XCTAssertEqual(h.broker.accounts[AccountKey(provider: "corp", subject: "sub-alice")]?.state, .loginRequired)
        let stored = try await h.store.storedAccount(subject: "sub-alice")
        XCTAssertEqual(stored?.state, .loginRequired, "kept across a restart")
        XCTAssertEqual(h.transport.tokenRequests.count, 2)
        _ = await h.tokenError()
        XCTAssertEqual(h.transport.tokenRequests.count, 2, "the provider is not asked again")
    }

    /// An answer that works in between, or a request with a caller's own scopes or params
    /// (whose `invalid_request` may be about them), does not count towards the second.
    func testOnlyTwoInvalidRequestsInARowToAPlainRefreshCount() async throws {
        let h = try await BrokerHarness(providerKeys: #"caller_params = ["acr"]"#)
        h.transport.script(.error("invalid_request"), .token(expiresIn: 3600, rotate: false), .error("invalid_request"))
        _ = await h.tokenError(TokenGetParams(resource: "https://api"))
        _ = try await h.token(TokenGetParams(resource: "https://git"))
        _ = await h.tokenError(TokenGetParams(resource: "https://other.example"))
        XCTAssertEqual(h.broker.accounts[AccountKey(provider: "corp", subject: "sub-alice")]?.state, .ready)

        h.transport.answerAlways(.error("invalid_request"))
        for _ in 0..<3 { _ = await h.tokenError(TokenGetParams(resource: "https://api", params: ["acr": "x"])) }
        XCTAssertEqual(h.broker.accounts[AccountKey(provider: "corp", subject: "sub-alice")]?.state, .ready,
                       "a caller's params may be what the provider refuses")
    }

    /// A token type the broker can never use is the client's set-up: -32010 naming the
    /// provider and what it sent, with no back-off, not "try again in 1 s".
    func testAnUnknownTokenTypeIsAConfigurationErrorNotAnOutage() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.json(#"{"access_token":"at-1","token_type":"mac","expires_in":3600}"#))
        let error = await h.tokenError()
        guard case .configuration(let provider, let message) = error else { return XCTFail("\(String(describing: error))") }
        XCTAssertEqual(provider, "corp")
        XCTAssertTrue(message.hasPrefix("corp: ") && message.contains("a token of type mac"), message)
        XCTAssertFalse(message.contains("try again"), message)
        _ = await h.tokenError()
        XCTAssertEqual(h.transport.tokenRequests.count, 2, "no back-off: nothing is down")
    }
}
