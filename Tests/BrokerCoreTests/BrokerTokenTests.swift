@testable import BrokerCore
import BrokerProtocol
import XCTest

/// `Broker` end to end in memory: the stub provider, the stub store over `MemoryStore`, and
/// a clock the test moves. What a caller of `token.get` sees as time passes.
final class BrokerTokenTests: XCTestCase {
    func testATokenIsServedUntilItsExpiryLessTheMarginThenRefreshed() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let first = try await h.token()
        // Counted from the second before the one it was asked in (ExpirySecondTests).
        XCTAssertEqual(first.expiresAt, Int64(h.clock.now) - 1 + 3600)
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
        XCTAssertEqual(h.transport.tokenRequests.first?["grant_type"], "refresh_token")

        h.clock.advance(3600 - 1 - 61)
        let cached = try XCTUnwrap(h.broker.tokens.cachedToken(TokenGetParams()), "61 s left, margin 60: still a cache hit")
        XCTAssertEqual(fingerprint(cached.accessToken), fingerprint(first.accessToken))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)

        h.clock.advance(2)
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()), "59 s left is inside the margin: the cache steps aside")
        let second = try await h.token()
        XCTAssertNotEqual(fingerprint(second.accessToken), fingerprint(first.accessToken))
        XCTAssertEqual(second.expiresAt, Int64(h.clock.now) - 1 + 3600)
        XCTAssertEqual(h.transport.tokenRequests.count, 2)
        XCTAssertEqual(h.transport.discoveries, 1, "discovery is fetched once")
    }

    func testMinTTLRaisesTheMarginForOneRequest() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let first = try await h.token()
        h.clock.advance(1000)  // 2600 s left
        let enough = try await h.token(TokenGetParams(minTTL: 2500))
        XCTAssertEqual(fingerprint(enough.accessToken), fingerprint(first.accessToken))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)

        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams(minTTL: 2700)))
        let fresh = try await h.token(TokenGetParams(minTTL: 2700))
        XCTAssertNotEqual(fingerprint(fresh.accessToken), fingerprint(first.accessToken))
        XCTAssertEqual(h.transport.tokenRequests.count, 2)
        // The fresh token now serves a request without min_ttl too.
        XCTAssertEqual(h.broker.tokens.cachedToken(TokenGetParams()).map { fingerprint($0.accessToken) }, fingerprint(fresh.accessToken))
    }

    func testMinTTLOutsideItsRangeIsRefusedCachedOrNot() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        for minTTL in [-1, TokenGetParams.minTTLRange.upperBound + 1] {
            XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams(minTTL: minTTL)))
            let error = await h.tokenError(TokenGetParams(minTTL: minTTL))
            XCTAssertEqual(error, .invalidRequest(message: "min_ttl must be between 0 and 86400 seconds"))
        }
        XCTAssertNotNil(h.broker.tokens.cachedToken(TokenGetParams(minTTL: 0)))
    }

    func testATokenShorterThanMinTTLIsAnErrorNotAServedToken() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.token(expiresIn: 300, rotate: false))
        let error = await h.tokenError(TokenGetParams(minTTL: 600))
        XCTAssertEqual(error, .invalidRequest(message: "corp issues tokens for this resource that live less than the min_ttl of 600 s asked for"))
        // Without min_ttl the same short token is fine.
        _ = try await h.token()
    }

    func testTheRotatedRefreshTokenIsStoredBeforeTheTokenIsServedAndUsedNext() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))
        let first = try await h.token()
        h.store.events.withLock { $0.append("served \(fingerprint(first.accessToken))") }
        XCTAssertEqual(h.store.events.withLock { $0 }, ["saved \(fingerprint("refresh-1"))", "served \(fingerprint("access-1"))"])
        let stored = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(stored, fingerprint("refresh-1"))

        h.clock.advance(3600)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.map { fingerprint($0["refresh_token"] ?? "") },
                       [fingerprint("refresh-0"), fingerprint("refresh-1")], "the second refresh uses the rotated token")
    }

    func testARotatedRefreshTokenTheStoreRefusesIsKeptInMemory() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))
        h.store.failSaves(true)
        // The caller still gets the token the provider issued.
        let served = try await h.token()
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-1"))
        let stored = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(stored, fingerprint("refresh-0"), "the store still holds the old one")

        // The next refresh uses the new refresh token from memory, not the stale stored one
        // (a rotating provider would revoke the grant for that).
        h.clock.advance(3600)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.last.map { fingerprint($0["refresh_token"] ?? "") }, fingerprint("refresh-1"))

        // Once the store takes writes again, the next rotation is written.
        h.store.failSaves(false)
        h.clock.advance(3600)
        _ = try await h.token()
        let now = try await h.store.storedRefreshToken(subject: "sub-alice")
        XCTAssertEqual(now, fingerprint("refresh-3"))
    }

    func testInvalidGrantTurnsTheAccountToLoginRequiredDropsTheCacheAndIsNotRetried() async throws {
        let h = try await BrokerHarness()
        let other = TokenGetParams(resource: "https://other.example")
        _ = try await h.token(other)
        h.clock.advance(3600)
        h.transport.answerAlways(.error("invalid_grant"))
        let expected = BrokerError.loginRequired(provider: "corp", message: "the sign-in of alice at corp is no longer valid: run `authctl login --provider corp`")
        let error = await h.tokenError()
        XCTAssertEqual(error, expected)
        XCTAssertEqual(h.broker.accounts.accountList().accounts.map(\.state), [.loginRequired])
        let marked = try await h.store.storedAccount(subject: "sub-alice")
        XCTAssertEqual(marked?.state, .loginRequired, "remembered in the store, so a restart says so too")

        // Told at once from now on: no second request to the provider, nothing from the cache.
        let requests = h.transport.tokenRequests.count
        h.clock.advance(-3000)  // the token for the other resource would still be fresh
        XCTAssertNil(h.broker.tokens.cachedToken(other))
        let again = await h.tokenError(other)
        XCTAssertEqual(again, expected)
        XCTAssertEqual(h.transport.tokenRequests.count, requests)
    }

    func testAProviderThatIsDownGetsTheCachedTokenServedWhileItIsValid() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        let first = try await h.token()
        h.transport.down = true
        h.clock.advance(3600 - 30)  // inside the margin: the broker tries to refresh
        let stale = try await h.token()
        XCTAssertEqual(fingerprint(stale.accessToken), fingerprint(first.accessToken), "30 s left beats no token")

        // A caller who needs more life than is left gets the error, with when to retry.
        h.clock.advance(2)  // the back-off of the first failure (1 s) is over
        let tooShort = await h.tokenError(TokenGetParams(minTTL: 60))
        guard case .providerUnreachable(provider: "corp", let retryAfter, _) = tooShort else {
            return XCTFail("expected provider unreachable, got \(String(describing: tooShort))")
        }
        XCTAssertEqual(retryAfter, 2, "the second failure in a row doubles the back-off")

        // Once the token has expired, nothing is served.
        h.clock.advance(60)
        let expired = await h.tokenError()
        guard case .providerUnreachable = expired else { return XCTFail("expected provider unreachable, got \(String(describing: expired))") }
    }

    func testAnUnreachableProviderIsBackedOffAndAskedAgainWhenTheWaitIsOver() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()  // discovery done while the provider is up
        h.clock.advance(3600)
        h.transport.down = true
        let tries = h.transport.tokenRequests.count

        let first = await h.tokenError()
        guard case .providerUnreachable(_, 1, _) = first else { return XCTFail("expected retry after 1 s, got \(String(describing: first))") }
        // Inside the back-off callers are told at once, without asking the provider.
        h.clock.advance(0.5)
        let waiting = await h.tokenError()
        XCTAssertEqual(waiting, .providerUnreachable(provider: "corp", retryAfter: 1, message: "corp did not answer recently: try again in 1 s"))

        h.clock.advance(1)
        let second = await h.tokenError()
        guard case .providerUnreachable(_, 2, _) = second else { return XCTFail("expected retry after 2 s, got \(String(describing: second))") }

        h.transport.down = false
        h.clock.advance(1)
        _ = await h.tokenError()  // still inside the 2 s back-off
        h.clock.advance(1.5)
        let served = try await h.token()
        XCTAssertEqual(fingerprint(served.accessToken), fingerprint("access-2"))
        XCTAssertEqual(h.transport.tokenRequests.count, tries + 1, "the provider was asked once more, when it was up")
    }

    func testProviderAndAccountAreResolvedAlikeOnBothPaths() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        for params in [TokenGetParams(), TokenGetParams(provider: "corp"), TokenGetParams(account: "alice"),
                       TokenGetParams(provider: "corp", account: "sub-alice")] {
            XCTAssertNotNil(h.broker.tokens.cachedToken(params), "\(params)")
            let result = try await h.broker.tokens.token(params)
            XCTAssertEqual(result.account, "alice")
        }
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams(provider: "nope")))
        let unknown = await h.tokenError(TokenGetParams(provider: "nope"))
        XCTAssertEqual(unknown, .unknownProvider(message: "no provider named nope is configured (configured: corp)"))
        // An empty name (`--provider ""`, `"provider":""`) is said to be empty, not shown as a gap.
        let empty = await h.tokenError(TokenGetParams(provider: ""))
        XCTAssertEqual(empty, .unknownProvider(message: "the provider name is empty: name one of the configured providers (corp)"))
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams(account: "bob")))
        let noAccount = await h.tokenError(TokenGetParams(account: "bob"))
        XCTAssertEqual(noAccount, .loginRequired(provider: "corp", message: "no account bob is signed in to corp: run `authctl login --provider corp`"))
    }

    /// A resource the provider does not serve is refused before the account is looked at:
    /// "not signed in" would send the user to sign in only to get this refusal afterwards.
    func testAnUnlistedResourceIsRefusedBeforeNotSignedIn() async throws {
        let h = try await BrokerHarness(extraConfig: """
            [providers.home]
            issuer = "\(StubTransport.issuer)"
            client_id = "other"
            resources = ["https://nas.example"]
            """)
        let unlisted = await h.tokenError(TokenGetParams(resource: "https://elsewhere.example", provider: "home"))
        // The resource's metadata (RFC 9728) decides, never a guess; here it has none.
        XCTAssertEqual(unlisted?.message.hasPrefix("resource is not one of the resources of [providers.home] in config.toml, and its metadata names no provider ("), true, "\(String(describing: unlisted))")
        XCTAssertEqual(unlisted?.message.hasSuffix("): add it there (and sign in again), or set any_resource = true there"), true)
        // A listed resource still says what to do first: sign in.
        let listed = await h.tokenError(TokenGetParams(resource: "https://nas.example", provider: "home"))
        XCTAssertEqual(listed, .notSignedIn("home"))
        XCTAssertEqual(h.transport.tokenRequests.count, 0, "neither asked the provider")
    }

    func testAUsernameTwoAccountsShareMustBeReplacedByTheSubject() async throws {
        let h = try await BrokerHarness(alsoSignedIn: ["sub-alice-2"])
        let bySubject = try await h.token(TokenGetParams(account: "sub-alice-2"))
        XCTAssertEqual(bySubject.account, "alice")
        XCTAssertNotNil(h.broker.tokens.cachedToken(TokenGetParams(account: "sub-alice-2")))

        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams(account: "alice")))
        let byName = await h.tokenError(TokenGetParams(account: "alice"))
        XCTAssertEqual(byName, .invalidRequest(message: "several accounts named alice are signed in to corp (subjects sub-alice, sub-alice-2): name one by its subject (`--account SUBJECT` for authctl, `account` in a request)"))
        let unnamed = await h.tokenError()
        XCTAssertEqual(unnamed, .invalidRequest(message: "several accounts are signed in to corp (alice, alice): name one (`--account` for authctl, `account` in a request), or set default_account or an account rule in [providers.corp] of config.toml (docs/configuration.md, \"Which account\")"))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)
    }

    /// A file without providers (resources may name theirs): the sentence names both ways,
    /// and the file's real syntax, not a `[[provider]]` array.
    func testNoProviderAtAllNamesTheProvidersTable() async throws {
        let h = try await BrokerHarness()
        h.broker.providers.replace(config: BrokerConfig(providers: []))
        let error = await h.tokenError()
        XCTAssertEqual(error, .unknownProvider(message: "no provider is configured: name a resource (`authctl token --resource URL`: its metadata names its provider), or add a [providers.NAME] table with issuer and client_id to config.toml"))
    }
}
