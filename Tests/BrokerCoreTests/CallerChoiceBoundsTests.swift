@testable import BrokerCore
import BrokerProtocol
import Foundation
import XCTest

/// Issue 21 item 3: what a caller chooses besides the resource (`scopes`, `params`) is
/// bounded by the provider's lists, by the `[[allow]]` rules and by a per-account cap on
/// distinct tokens, each refused before the provider is asked.
final class CallerChoiceBoundsTests: XCTestCase {
    private func error(_ h: BrokerHarness, _ p: TokenGetParams) async -> BrokerError? {
        do { _ = try await h.token(p); return nil } catch { return error }
    }

    func testThreeThousandDistinctParamValuesStopAtTheCapWithoutAProviderRequest() async throws {
        let h = try await BrokerHarness(providerKeys: """
            caller_params = ["organization_id"]
            access_tokens = "independent"
            """)
        var served = 0, refused = 0
        for i in 0..<3000 {
            switch await error(h, TokenGetParams(resource: "https://api", params: ["organization_id": "org-\(i)"])) {
            case nil: served += 1
            case .overloaded(let message)?:
                refused += 1
                if refused == 1 { XCTAssertTrue(message.contains("max_tokens_per_account"), message) }
            case let other?: XCTFail("\(other)"); return
            }
        }
        XCTAssertEqual(served, 64, "the default max_tokens_per_account")
        XCTAssertEqual(refused, 3000 - 64)
        XCTAssertEqual(h.transport.tokenRequests.count, 64, "no provider request past the cap")
        // The tokens already held are still served, from the cache.
        _ = try await h.token(TokenGetParams(resource: "https://api", params: ["organization_id": "org-3"]))
        XCTAssertEqual(h.transport.tokenRequests.count, 64)
        // Once they expire, there is room again.
        h.clock.advance(3600)
        _ = try await h.token(TokenGetParams(resource: "https://api", params: ["organization_id": "org-4000"]))
        XCTAssertEqual(h.transport.tokenRequests.count, 65)
    }

    func testParamsAndScopesOutsideTheProvidersListsAreRefusedWithoutAProviderRequest() async throws {
        let h = try await BrokerHarness()
        guard case .invalidRequest(let m)? = await error(h, TokenGetParams(params: ["organization_id": "o"])) else {
            return XCTFail("params no caller_params names were sent")
        }
        XCTAssertTrue(m.contains("caller_params"), m)
        guard case .invalidRequest(let s)? = await error(h, TokenGetParams(scopes: ["admin"])) else {
            return XCTFail("a scope the provider's scopes do not hold was sent")
        }
        XCTAssertTrue(s.contains("scope_sets"), s)
        XCTAssertEqual(h.transport.tokenRequests.count, 0)
        // Without scope_sets, any set of the configured scopes (a refresh may narrow them).
        _ = try await h.token(TokenGetParams(scopes: ["openid", "email"]))
        XCTAssertEqual(h.transport.tokenRequests.count, 1)

        let listed = try await BrokerHarness(providerKeys: #"scope_sets = [["read"], ["read", "write"]]"#)
        _ = try await listed.token(TokenGetParams(scopes: ["write", "read"]))
        _ = try await listed.token(TokenGetParams(scopes: ["read"]))
        let unlisted = await error(listed, TokenGetParams(scopes: ["write"]))
        XCTAssertNotNil(unlisted, "only the listed sets")
        let defaultSet = await error(listed, TokenGetParams(scopes: ["openid"]))
        XCTAssertNotNil(defaultSet, "scope_sets replaces the default")
        XCTAssertEqual(listed.transport.tokenRequests.count, 2)
        let any = try await BrokerHarness(providerKeys: "any_scopes = true")
        _ = try await any.token(TokenGetParams(scopes: ["anything", "at-all"]))
        XCTAssertTrue(any.transport.tokenRequests.last?["scope"]?.contains("at-all") == true)
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\nscope_sets=[\"read\"]\n", file: "c.toml")) {
            XCTAssertEqual(($0 as? ConfigError)?.key, "providers.corp.scope_sets")
        }
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\ncaller_params=[\"resource\"]\n", file: "c.toml")) {
            XCTAssertEqual(($0 as? ConfigError)?.key, "providers.corp.caller_params")
        }
    }

    /// The issue's case, in the default `access_tokens = "one-per-refresh-token"`: a program
    /// allowed only the API resource cannot make the broker drop git's token by naming new
    /// scopes or params; a rule that names them lets its program ask for those only.
    func testRulesBoundScopesAndParams() async throws {
        let exe = try XCTUnwrap(FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let h = try await BrokerHarness(providerKeys: """
            caller_params = ["organization_id", "acr"]

            [[allow]]
            exe = "\(exe)"
            resources = ["https://api"]
            """)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: exe,
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        func authorize(_ p: TokenGetParams, _ broker: Broker) -> BrokerError? {
            do throws(BrokerError) { _ = try broker.authorize(.tokenGet, p) { _ in me }; return nil } catch { return error }
        }
        let git = try await h.token(TokenGetParams(resource: "https://git"))  // git's own token, cached
        XCTAssertNil(authorize(TokenGetParams(resource: "https://api"), h.broker))
        for attempt in [TokenGetParams(resource: "https://api", scopes: ["openid"]),
                        TokenGetParams(resource: "https://api", params: ["organization_id": "x1"])] {
            guard case .forbidden(let m)? = authorize(attempt, h.broker) else { return XCTFail("\(attempt) was granted") }
            XCTAssertTrue(m.contains("scopes") || m.contains("params"), m)
        }
        XCTAssertEqual(h.broker.tokens.cachedToken(TokenGetParams(resource: "https://git")).map { fingerprint($0.accessToken) },
                       fingerprint(git.accessToken), "git's token is still the one served")

        let named = try await BrokerHarness(providerKeys: """
            caller_params = ["organization_id", "acr"]
            scope_sets = [["read"], ["read", "write"], ["admin"]]

            [[allow]]
            exe = "\(exe)"
            resources = ["https://api"]
            scopes = [["read"], ["read", "write"]]
            params = ["organization_id"]
            """)
        XCTAssertNil(authorize(TokenGetParams(resource: "https://api", scopes: ["write", "read"], params: ["organization_id": "o"]), named.broker))
        XCTAssertNil(authorize(TokenGetParams(resource: "https://api", scopes: ["read"]), named.broker))
        XCTAssertNil(authorize(TokenGetParams(resource: "https://api"), named.broker), "no scopes and no params: the default")
        XCTAssertNotNil(authorize(TokenGetParams(resource: "https://api", scopes: ["admin"]), named.broker))
        XCTAssertNotNil(authorize(TokenGetParams(resource: "https://api", params: ["acr": "x"]), named.broker))
    }

    func testTheKeysAreReadAndCheckedWhereTheyStand() throws {
        let base = "[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n"
        let config = try ConfigLoader.parse(base + """
            caller_params = ["organization_id"]
            scope_sets = [["write", "read"]]
            max_tokens_per_account = 8
            [daemon]
            cache_misses_per_minute = 0
            [[allow]]
            exe = "/usr/bin/git"
            resources = ["*"]
            scopes = "*"
            params = ["*"]
            [[allow]]
            exe = "/usr/bin/curl"
            resources = ["*"]
            scopes = [["b", "a"]]
            """, file: "c.toml")
        let corp = try XCTUnwrap(config.provider(named: "corp"))
        XCTAssertEqual(corp.scopeSets, [["read", "write"]], "sorted once, when read")
        XCTAssertEqual(corp.callerParams, ["organization_id"])
        XCTAssertEqual(corp.maxTokensPerAccount, 8)
        XCTAssertEqual(config.daemon.cacheMissesPerMinute, 0)
        XCTAssertEqual(config.policy.rules[0].scopes, .any)
        XCTAssertEqual(config.policy.rules[0].params, ["*"])
        XCTAssertEqual(config.policy.rules[1].scopes, .sets([["a", "b"]]))
        XCTAssertEqual(config.policy.rules[1].params, [], "none unless named")
        for (text, key) in [("[[allow]]\nexe=\"/usr/bin/git\"\nscopes=[\"read\"]\n", "allow[0].scopes"),
                            ("max_tokens_per_account = 0\n", "providers.corp.max_tokens_per_account"),
                            ("any_scopes = \"yes\"\n", "providers.corp.any_scopes"),
                            ("[daemon]\ncache_misses_per_minute = -1\n", "daemon.cache_misses_per_minute")] {
            XCTAssertThrowsError(try ConfigLoader.parse(base + text, file: "c.toml"), text) {
                XCTAssertEqual(($0 as? ConfigError)?.key, key, text)
            }
        }
    }

    /// `token.reject` drops only what the caller may get: with the scopes, params and
    /// exchange audience of the token's key, not its resource alone.
    func testARejectIsHeldToTheTokensScopesParamsAndAudience() async throws {
        let exe = try XCTUnwrap(FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let h = try await BrokerHarness(providerKeys: """
            caller_params = ["organization_id"]
            access_tokens = "independent"

            [[allow]]
            exe = "\(exe)"
            resources = ["https://api"]
            """)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: exe,
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        func reject(_ p: TokenRejectParams) -> BrokerError? {
            do throws(BrokerError) { _ = try h.broker.authorize(.tokenReject, p) { _ in me }; return nil } catch { return error }
        }
        // Other programs' tokens of the same resource, got without the policy.
        let scoped = try await h.token(TokenGetParams(resource: "https://api", scopes: ["openid"]))
        let withParams = try await h.token(TokenGetParams(resource: "https://api", params: ["organization_id": "o"]))
        let exchanged = try await h.broker.exchange.exchangeToken(TokenExchangeParams(audience: "payroll", resource: "https://api"))
        XCTAssertNil(reject(TokenRejectParams(resource: "https://api")), "its own token's key")
        XCTAssertNotNil(reject(TokenRejectParams(resource: "https://api", scopes: ["openid"])), "scopes its rule does not name")
        XCTAssertNotNil(reject(TokenRejectParams(accessToken: scoped.accessToken)))
        XCTAssertNotNil(reject(TokenRejectParams(accessToken: withParams.accessToken)), "params its rule does not name")
        XCTAssertNotNil(reject(TokenRejectParams(accessToken: exchanged.accessToken)), "an audience its rule does not name")
        let ownExchange = try await h.broker.exchange.exchangeToken(TokenExchangeParams(audience: "https://api"))
        XCTAssertNil(reject(TokenRejectParams(accessToken: ownExchange.accessToken)), "an exchange for its own resource, named as the audience")
    }
}
