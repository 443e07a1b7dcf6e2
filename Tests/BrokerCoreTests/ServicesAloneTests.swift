@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import Logging
import OAuth
import SecretStore
import Synchronization
import XCTest

/// Issue 23 item 1: each service is built with only what it uses, nothing else of the
/// daemon: no composition root, no server. The provider is the STUB of `BrokerHarness`
/// (its token endpoint answers on cue); the store is the real `MemoryStore`.
///
/// Issue 40 item 2, the walls: the exchange, proofs and status services are built from the
/// narrow values the root builds (`TokensForExchange`, `TokensForProofs`, `StatusReadings`)
/// and work from those alone. That those values are all a service can reach is a fact the
/// compiler keeps: the services' and the values' stored properties are `private` (a
/// `tokens.cache` from the exchange service does not compile), which
/// `testTheServicesKeepTheirStatePrivate` reads from the sources, since a test cannot
/// compile code that must not compile.
final class ServicesAloneTests: XCTestCase {
    /// The lowest layers, which every other service is built on: providers and accounts.
    private struct Base {
        let clock = TestClock()
        let transport = StubTransport()
        let store = MemoryStore()
        let logs = LogLines()
        let events = EventHub()
        let providers: ProvidersService
        let accounts: AccountsService

        /// - Parameter signedIn: whether `alice` (subject `sub-alice`) is in the store.
        init(signedIn: Bool = true, providerKeys: String = "") async throws {
            let config = try BrokerHarness.config(providerKeys: providerKeys)
            providers = ProvidersService(config: config, transport: transport, store: store, clock: clock.wallClock,
                                         events: events, logger: logs.logger)
            accounts = AccountsService(providers: providers, store: store, logger: logs.logger)
            if signedIn {
                let alice = Account(key: AccountKey(provider: "corp", subject: "sub-alice"), issuer: StubTransport.issuer,
                                    clientID: "authbroker", username: "alice", refreshToken: "refresh-0", idToken: nil, state: .ready)
                try await store.save(AccountSecret.credential(for: alice))
            }
            await accounts.start()
        }

        /// The tokens service without any sign-in (`wait_for_sign_in` meets `NoSignIns`), and
        /// the parts the composition root builds the narrow values from.
        struct Tokens {
            let service: TokensService
            let refresher: Refresher
            let ahead: RefreshAhead
            let counters: BrokerCounters
        }

        func tokenParts() -> Tokens {
            let counters = BrokerCounters()
            let refresher = Refresher(cache: TokenCache(), accounts: accounts, providers: providers, counters: counters,
                                      events: events, logger: logs.logger, clock: clock.wallClock)
            let ahead = RefreshAhead(tick: .milliseconds(10), refresher: refresher, providers: providers,
                                     clock: clock.wallClock, logger: logs.logger)
            let service = TokensService(refresher: refresher, ahead: ahead, accounts: accounts, providers: providers,
                                        counters: counters, signIns: NoSignIns(), clock: clock.wallClock, logger: logs.logger)
            return Tokens(service: service, refresher: refresher, ahead: ahead, counters: counters)
        }

        func tokens() -> TokensService { tokenParts().service }

        func forgetting(_ tokens: Tokens) -> TokenForgetting {
            TokenForgetting(cache: tokens.refresher.cache, ahead: tokens.ahead)
        }

        /// What the root hands the exchange service.
        func forExchange(_ tokens: Tokens) -> TokensForExchange {
            TokensForExchange(tokens: tokens.service, refresher: tokens.refresher, cache: tokens.refresher.cache, accounts: accounts,
                              providers: providers, counters: tokens.counters)
        }

        /// What the root hands the status service.
        func readings(_ tokens: Tokens) -> StatusReadings {
            StatusReadings(providers: providers, accounts: accounts, cache: tokens.refresher.cache, counters: tokens.counters)
        }
    }

    /// A STUB of the sign-in on demand: there is none in these tests.
    private struct NoSignIns: SignInWaiting {
        func awaitSignIn(provider name: String, seconds: Int) async throws(BrokerError) {
            throw BrokerError.notSignedIn(name)
        }
    }

    func testProvidersAloneKeepAClientSecretInTheStore() async throws {
        let store = MemoryStore()
        let providers = ProvidersService(config: try BrokerHarness.config(), transport: StubTransport(), store: store,
                                         logger: LogLines().logger)
        XCTAssertEqual(providers.defaultProviderName(), "corp")
        let result = try await providers.setClientSecret(SetSecretParams(provider: "corp", clientSecret: " s3cret "))
        XCTAssertTrue(result.stored)
        let items = try await store.loadAll()
        XCTAssertEqual(items.compactMap(ClientSecretItem.secret(from:)), ["s3cret"])
        XCTAssertEqual(providers.provider(orDefault: nil)?.config.clientSecret, "s3cret", "in force at once")
    }

    func testAccountsAloneLoadTheStoreAndNameTheAccount() async throws {
        let base = try await Base()
        XCTAssertEqual(base.accounts.accountList().accounts.map(\.subject), ["sub-alice"])
        guard case .found(let provider, let account) = base.accounts.resolve(provider: nil, account: "alice") else {
            return XCTFail("alice is not found")
        }
        XCTAssertEqual([provider.name, account.key.subject], ["corp", "sub-alice"])
    }

    func testTokensWithProvidersAccountsAndAStoreButNoSignIn() async throws {
        let base = try await Base()
        let tokens = base.tokens()
        XCTAssertNil(tokens.cachedToken(TokenGetParams(resource: "https://api")), "nothing cached yet")
        let minted = try await tokens.token(TokenGetParams(resource: "https://api"))
        XCTAssertEqual(tokens.cachedToken(TokenGetParams(resource: "https://api"))?.accessToken, minted.accessToken)
        XCTAssertEqual(try tokens.rejectToken(TokenRejectParams(accessToken: minted.accessToken)).dropped, true)
        XCTAssertNil(tokens.cachedToken(TokenGetParams(resource: "https://api")))
    }

    func testExchangeOverTheTokensService() async throws {
        let base = try await Base()
        let exchange = ExchangeService(tokens: base.forExchange(base.tokenParts()), transport: base.transport, clock: base.clock.wallClock, logger: base.logs.logger)
        let first = try await exchange.exchangeToken(TokenExchangeParams(audience: "payroll"))
        XCTAssertEqual(exchange.cachedExchange(TokenExchangeParams(audience: "payroll"))?.accessToken, first.accessToken)
        XCTAssertEqual(base.transport.tokenRequests.last?["grant_type"], "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange")
    }

    func testProofsOverTheTokensServiceRefuseAProviderWithoutDPoP() async throws {
        let base = try await Base()
        let proofs = ProofsService(tokens: TokensForProofs(tokens: base.tokens(), accounts: base.accounts, providers: base.providers),
                                   clock: base.clock.wallClock)
        do {
            _ = try await proofs.dpopProof(DPoPProofParams(token: TokenGetParams(), htm: "GET", htu: "https://api/x"))
            XCTFail("a proof for a provider without DPoP")
        } catch {
            XCTAssertTrue(error.message.contains("does not use DPoP"), error.message)
        }
    }

    func testSignInWithoutTheTokensService() async throws {
        let base = try await Base(signedIn: false)
        let cache = TokenCache()
        let refresher = Refresher(cache: cache, accounts: base.accounts, providers: base.providers, counters: BrokerCounters(),
                                  events: base.events, logger: base.logs.logger, clock: base.clock.wallClock)
        let ahead = RefreshAhead(tick: .seconds(1), refresher: refresher, providers: base.providers, clock: base.clock.wallClock,
                                 logger: base.logs.logger)
        let signIns = SignInService(providers: base.providers, accounts: base.accounts, tokens: TokenForgetting(cache: cache, ahead: ahead),
                                    events: base.events, counters: BrokerCounters(), redirects: nil, announcer: nil,
                                    logger: base.logs.logger, clock: base.clock.wallClock)
        do {
            _ = try await signIns.startLogin(LoginStartParams(flow: .browser))
            XCTFail("a browser sign-in without a redirect listener")
        } catch {
            XCTAssertTrue(error.message.contains("authctl login --device"), error.message)
        }
        do {
            _ = try await signIns.waitLogin(LoginWaitParams(loginID: "none", provider: "corp"))
            XCTFail("a wait for no sign-in")
        } catch {
            XCTAssertTrue(error.message.contains("no sign-in in progress"), error.message)
        }
        XCTAssertEqual(signIns.inProgress, 0)
    }

    func testSignOutForgetsTheAccountAndItsTokens() async throws {
        let base = try await Base()
        let parts = base.tokenParts()
        let tokens = parts.service
        _ = try await tokens.token(TokenGetParams(resource: "https://api"))
        let signOut = SignOutService(accounts: base.accounts, tokens: base.forgetting(parts), events: base.events, logger: base.logs.logger,
                                     redirects: nil)
        let result = try await signOut.logout(LogoutParams(local: true))
        XCTAssertFalse(result.revoked)
        XCTAssertEqual(base.accounts.accountList().accounts, [])
        XCTAssertNil(tokens.cachedToken(TokenGetParams(resource: "https://api")))
        let stored = try await base.store.loadAll()
        XCTAssertEqual(stored, [], "the item is gone from the store")
    }

    func testClaimsOverAccountsAndTokens() async throws {
        let base = try await Base()
        let claims = ClaimsService(accounts: base.accounts, tokens: base.tokens(), counters: BrokerCounters(), clock: base.clock.wallClock)
        do {
            _ = try claims.whoami(AccountParams())
            XCTFail("claims of an account without an ID token")
        } catch {
            XCTAssertTrue(error.message.contains("has no ID token for alice"), error.message)
        }
    }

    func testStatusShowsOnlyWhatTheGateLetsTheCallerSee() async throws {
        let base = try await Base()
        let parts = base.tokenParts()
        _ = try await parts.service.token(TokenGetParams(resource: "https://api"))
        let rules = CallerPolicy(rules: [AllowRule(executable: "/nonexistent/program", resources: ["https://api"])])
        let gate = CallerGate(source: FixedPolicy(rules, defaultProvider: "corp"), confirmer: nil, logger: base.logs.logger)
        let status = StatusService(readings: base.readings(parts), gate: gate, socketPath: "/nonexistent/socket", clock: base.clock.wallClock)
        XCTAssertEqual(status.status().providers.first?.accounts.first?.tokens.count, 1)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: "/proc/self/exe",
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        let seen = status.status(for: { _ in me })
        XCTAssertEqual(seen.providers.first?.accounts.first?.tokens.count, 0, "no rule grants this program the token")
    }

    func testEventsRegisterTheirMethodsAsOpenSubscriptionsWithAReason() {
        struct Names: MethodRegistrar {
            var open: [RPCMethod: String] = [:]
            mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>) {
                guard case .subscription = spec.answer else { return }
                open[spec.method] = spec.access.openReason
            }
            mutating func add(_ spec: SecretAnswerSpec) {}
        }
        var names = Names()
        EventsService().register(into: &names)
        XCTAssertEqual(Set(names.open.keys), [.eventsSubscribe, .eventsUnsubscribe], "both are subscriptions the connection carries out, open")
    }

    func testTheGateAloneRefusesWhatNoRuleGrants() {
        let rules = CallerPolicy(rules: [AllowRule(executable: "/nonexistent/program", resources: ["https://api"])])
        let gate = CallerGate(source: FixedPolicy(rules, defaultProvider: "corp"), confirmer: nil, logger: LogLines().logger)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: "/usr/bin/curl",
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        do {
            _ = try gate.decide(.token(provider: nil, targets: ["https://api"], scopes: [], params: []), identify: { _ in me })
            XCTFail("granted")
        } catch {
            XCTAssertEqual(error.message, "forbidden by policy: /usr/bin/curl may not have tokens for https://api of corp: add an [[allow]] rule for it to config.toml")
        }
        let unasked: CallerIdentification = { _ throws(BrokerError) in throw BrokerError.internalError("not asked") }
        XCTAssertNil(try gate.decide(nil, identify: unasked), "a request that asks nothing of the rules is not even identified")
    }

    // MARK: The walls

    func testStatusFromItsReadingsAloneWithoutTheTokensService() async throws {
        let base = try await Base()
        let cache = TokenCache()
        let counters = BrokerCounters()
        let key = CacheKey(account: AccountKey(provider: "corp", subject: "sub-alice"), resource: "https://api", scopes: [])
        let reading = base.clock.reading
        cache.store(CachedToken(accessToken: "cached", tokenType: "Bearer", expiresAt: base.clock.now + 600), for: key, now: reading)
        counters.refreshes.increment()
        let gate = CallerGate(source: FixedPolicy(CallerPolicy(rules: []), defaultProvider: "corp"), confirmer: nil, logger: base.logs.logger)
        let status = StatusService(readings: StatusReadings(providers: base.providers, accounts: base.accounts, cache: cache, counters: counters),
                                   gate: gate, socketPath: "/nonexistent/socket", clock: base.clock.wallClock)
        let shown = status.status()
        XCTAssertEqual(shown.providers.first?.accounts.first?.tokens.map(\.resource), ["https://api"], "the cache's entry, read through the readings")
        XCTAssertEqual(shown.counters.refreshes, 1)
        XCTAssertEqual(shown.store, "memory")
    }

    func testTheAccountsAloneHoldARotationTheStoreRefusesAndWriteItInTurn() async throws {
        let store = StubStore()
        let logs = LogLines()
        let providers = ProvidersService(config: try BrokerHarness.config(), transport: StubTransport(), store: store, logger: logs.logger)
        let accounts = AccountsService(providers: providers, store: store, logger: logs.logger)
        let key = AccountKey(provider: "corp", subject: "sub-alice")
        let alice = Account(key: key, issuer: StubTransport.issuer, clientID: "authbroker", username: "alice", refreshToken: "refresh-0",
                            idToken: nil, state: .ready)
        try await store.save(AccountSecret.credential(for: alice))
        await accounts.start()
        store.failSaves(true)
        await accounts.writes.keepRotation("refresh-1", idToken: nil, of: alice, chain: nil, resource: nil)
        XCTAssertEqual(accounts[key]?.refreshToken, "refresh-1", "memory first: the rotated refresh token is never lost")
        XCTAssertNotNil(accounts.accountList().accounts.first?.unsaved, "listed as not saved")
        let refusedWrite = try await storedRefreshToken(store, key)
        XCTAssertEqual(refusedWrite, "refresh-0")

        // The write waits its turn behind the account's refresh in flight (here held open).
        store.failSaves(false)
        let (opened, open) = AsyncStream<Void>.makeStream()
        let (entered, enter) = AsyncStream<Void>.makeStream()
        let refresh = Task {
            await accounts.writes.turn(of: key).exclusive {
                enter.yield()
                for await _ in opened { break }
            }
        }
        for await _ in entered { break }  // the refresh holds the account's turn before the write asks for it
        let write = Task { await accounts.writes.storeUnsavedInTurn(key) }
        // The write is given time to go ahead wrongly: what is tested is an absence, so a fixed time.
        try await Task.sleep(for: .milliseconds(200))
        let beside = try await storedRefreshToken(store, key)
        XCTAssertEqual(beside, "refresh-0", "written beside a refresh of the account")
        open.yield()
        await refresh.value
        let refused = await write.value
        XCTAssertNil(refused)
        let written = try await storedRefreshToken(store, key)
        XCTAssertEqual(written, "refresh-1")
        XCTAssertNil(accounts.accountList().accounts.first?.unsaved)
    }

    private func storedRefreshToken(_ store: StubStore, _ key: AccountKey) async throws -> String? {
        try await store.memory.loadAll().compactMap(AccountSecret.account(from:)).first { $0.key == key }?.refreshToken
    }

    /// The compile-time walls, read from the sources: every stored property of the services
    /// and of the narrow values is `private`, but the few named here, each for its reason.
    func testTheServicesKeepTheirStatePrivate() throws {
        let core = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/BrokerCore")
        let files = ["Tokens/TokensService.swift", "Tokens/ExchangeService.swift", "Proofs/ProofsService.swift",
                     "Status/StatusService.swift", "Clouds/CloudsService.swift", "Accounts/ClaimsService.swift",
                     "Accounts/AccountsService.swift", "Accounts/AccountWrites.swift", "Accounts/AccountTurns.swift",
                     "Tokens/Refresher.swift", "Tokens/TokensForExchange.swift", "Proofs/TokensForProofs.swift",
                     "Status/StatusReadings.swift", "Tokens/TokenForgetting.swift", "Login/SignInService.swift",
                     "Accounts/SignOutService.swift", "Discovery/DiscoveryService.swift", "Providers/ProvidersService.swift",
                     "Events/EventsService.swift"]
        let allowed: Set<String> = [
            "ExchangeService.clouds",   // the clouds service it holds, which the root registers
            "StatusService.gate",       // the caller policy, which the root hands to the server
            "StatusReadings.counters",  // the daemon's counters, which the root hands to the server
            "AccountsService.writes",   // the accounts' own persistence rules (AccountWrites)
            "Refresher.cache",          // the tokens service's cache, which it writes
            "SignInService.onDemand",   // the sign-in on demand, handed to the tokens service as `SignInWaiting`
            "EventsService.hub",        // the hub every service emits into, handed to them by the root
        ]
        // A stored property at the type's top level that is not `private`: every `let`, and a
        // `var` without a body (`var x: T { ... }` is computed, a method by another name).
        let member = try NSRegularExpression(pattern: #"^    (?:public |package )?(?:let (\w+)|var (\w+)[^{]*$)"#)
        var open: [String] = []
        for file in files {
            let text = try String(contentsOf: core.appendingPathComponent(file), encoding: .utf8)
            let type = (file as NSString).lastPathComponent.replacingOccurrences(of: ".swift", with: "")
            for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
                let range = NSRange(line.startIndex..., in: line)
                guard let match = member.firstMatch(in: line, range: range),
                      let name = Range(match.range(at: 1), in: line) ?? Range(match.range(at: 2), in: line) else { continue }
                let qualified = "\(type).\(line[name])"
                if !allowed.contains(qualified) { open.append(qualified) }
            }
        }
        XCTAssertEqual(open, [], "state another service could reach: make it private, and give the service that needs it a narrow value")
    }
}
