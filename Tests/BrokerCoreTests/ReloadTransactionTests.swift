@testable import BrokerCore
import BrokerProtocol
import SecretStore
import Synchronization
import XCTest

/// A reload (SIGHUP) is a transaction: the new configuration with its accounts, or the old
/// one untouched; callers never hear "not signed in" because of it. The store is the STUB
/// store of the harness, made to refuse or hold its reads (a locked or hung keyring).
final class ReloadTransactionTests: XCTestCase {
    /// `corp` with other resources: a changed provider whose issuer and client stay.
    private func otherResources() throws -> BrokerConfig {
        var config = try BrokerHarness.config()
        config.providers[0].resources = ["https://api", "https://git"]
        return config
    }

    func testAReloadThatCannotReadTheStoreChangesNothing() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        h.store.failReads(true)
        // Another client: the accounts of `corp` must come from the store.
        let changed = try BrokerHarness.config(clientID: "authbroker-2")
        do throws(BrokerError) {
            _ = try await h.broker.reload(changed)
            XCTFail("the reload went through without the accounts of the changed provider")
        } catch {
            guard case .storeUnavailable = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(h.broker.config.providers.map(\.clientID), ["authbroker"], "the old configuration stays")
        XCTAssertEqual(h.broker.accounts.accountList().accounts.map(\.subject), ["sub-alice"], "and its accounts")
        h.clock.advance(3600)
        _ = try await h.token()  // refreshed under the old configuration
    }

    func testAChangedProviderKeepsItsAccountsWhileTheStoreHangs() async throws {
        let h = try await BrokerHarness()
        h.store.holdReads()
        defer { h.store.releaseReads() }
        let done = Flag()
        let config = try otherResources()
        let reload = Task {
            defer { done.set() }
            return try await h.broker.reload(config)
        }
        try await waitUntil { h.store.readsWaiting > 0 || done.isSet }
        _ = try await h.token()  // never "not signed in"
        h.store.releaseReads()
        _ = try await reload.value
        XCTAssertEqual(h.broker.config.providers[0].resources, ["https://api", "https://git"])
        XCTAssertEqual(h.broker.accounts.accountList().accounts.map(\.subject), ["sub-alice"])
        _ = try await h.token()
    }

    func testWhileANewClientsAccountsAreReadTheOldOnesServe() async throws {
        let h = try await BrokerHarness()
        // The same person signed in through the new client before (an item of its own).
        let other = Account(key: AccountKey(provider: "corp", subject: "sub-alice"), issuer: StubTransport.issuer,
                            clientID: "authbroker-2", username: "alice", refreshToken: "refresh-other", idToken: nil, state: .ready)
        try await h.store.memory.save(AccountSecret.credential(for: other))
        h.store.holdReads()
        defer { h.store.releaseReads() }
        let config = try BrokerHarness.config(clientID: "authbroker-2")
        let reload = Task { try await h.broker.reload(config) }
        try await waitUntil { h.store.readsWaiting > 0 }
        _ = try await h.token()  // from the old client's account, while the new one's is read
        h.store.releaseReads()
        _ = try await reload.value
        h.clock.advance(3600)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.last?["refresh_token"], "refresh-other", "the new client's refresh token is used")
    }

    func testCallersNeverHearNotSignedInAcrossReloads() async throws {
        let h = try await BrokerHarness()
        try await h.store.memory.save(AccountSecret.credential(for: Account(
            key: AccountKey(provider: "corp", subject: "sub-alice"), issuer: StubTransport.issuer, clientID: "authbroker-2",
            username: "alice", refreshToken: "refresh-other", idToken: nil, state: .ready)))
        h.store.slowReads(.milliseconds(5))
        // Changed resources (nothing to read), another client (its accounts are read), back.
        let configs = [try otherResources(), try BrokerHarness.config(clientID: "authbroker-2"), try BrokerHarness.config()]
        let stop = Flag()
        let callers = (0..<4).map { _ in
            Task { () -> [BrokerError] in
                var errors: [BrokerError] = []
                while !stop.isSet {
                    do throws(BrokerError) {
                        _ = try await h.token(TokenGetParams(resource: "https://api"))
                    } catch {
                        errors.append(error)
                    }
                    await Task.yield()
                }
                return errors
            }
        }
        for round in 0..<10 {
            _ = try await h.broker.reload(configs[round % 3])
            await Task.yield()
        }
        stop.set()
        var errors: [BrokerError] = []
        for caller in callers { errors += await caller.value }
        XCTAssertEqual(errors, [], "no caller may be told anything because of a reload")
    }

    func testARotatedRefreshTokenNotYetStoredSurvivesAReload() async throws {
        let h = try await BrokerHarness()
        h.transport.answerAlways(.token(expiresIn: 3600, rotate: true))
        h.store.failSaves(true)
        _ = try await h.token()  // rotated: the new refresh token is only in memory
        let rotated = try XCTUnwrap(h.broker.accounts[AccountKey(provider: "corp", subject: "sub-alice")]?.refreshToken)
        XCTAssertNotEqual(rotated, "refresh-0")
        _ = try await h.broker.reload(try otherResources())
        h.clock.advance(3600)
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.last?["refresh_token"], rotated,
                       "the refresh after the reload uses the newest refresh token, not the stored older one")
    }

    /// Polls `condition` (up to 5 s).
    private func waitUntil(_ condition: @Sendable () -> Bool, file: StaticString = #filePath, line: UInt = #line) async throws {
        for _ in 0..<500 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTFail("the condition did not come true", file: file, line: line)
    }
}

/// A flag set once, read by other tasks.
private final class Flag: Sendable {
    private let flag = Mutex(false)
    var isSet: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}

/// A reload that changes nothing about how tokens are got keeps the provider's cached
/// tokens (issue 37: a `post_logout_redirect_uri` change made every busy caller miss).
final class ReloadKeepsTokensTests: XCTestCase {
    func testAChangeThatDoesNotTouchTokensKeepsTheCachedOnes() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        let before = h.transport.tokenRequests.count
        let same = try BrokerHarness.config(providerKeys: "post_logout_redirect_uri = \"https://example.com/bye\"\nredirect_port = 8765")
        _ = try await h.broker.reload(same)
        XCTAssertNotNil(h.broker.tokens.cachedToken(TokenGetParams()), "still cached after the reload")
        _ = try await h.token()
        XCTAssertEqual(h.transport.tokenRequests.count, before, "no refresh for an unchanged token")

        let other = try BrokerHarness.config(providerKeys: "token_params = { tenant = \"x\" }")
        _ = try await h.broker.reload(other)
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()), "a change of how tokens are asked for drops them")
    }
}
