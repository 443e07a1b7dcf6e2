@testable import BrokerCore
import BrokerProtocol
import Foundation
import SecretStore
import Synchronization
import XCTest

/// A browser sign-in whose redirect comes back in the very instant its deadline fires.
final class BrowserSignInDeadlineTests: XCTestCase {
    /// A STUB loopback listener (the real one cannot be made to hit the instant): its wait
    /// ends only when cancelled, and then hands over the redirect that arrived just then,
    /// as the real listener does when a redirect resumes its waiter as the wait is stopped.
    private final class RedirectAtTheDeadline: RedirectListening, RedirectListener {
        let port: UInt16 = 1
        private let answered = Mutex<[SignInPage]>([])
        var pages: [SignInPage] { answered.withLock { $0 } }

        func listen(port: UInt16, screen: RedirectScreen) async throws(BrokerError) -> any RedirectListener { self }

        func redirect() async -> BrowserRedirect? {
            try? await Task.sleep(for: .seconds(3600))
            return BrowserRedirect(query: ["code": "c", "state": "s"]) { [self] page in
                self.answered.withLock { $0.append(page) }
            }
        }

        func close() async {}
    }

    func testARedirectAtTheDeadlineGetsThePageSayingTheSignInRanOut() async throws {
        let clock = TestClock()
        let transport = StubTransport()
        transport.discoveryExtra = #","authorization_endpoint":"\#(StubTransport.issuer)/authorize""#
        let logs = LogLines()
        let events = EventHub()
        let providers = ProvidersService(config: try BrokerHarness.config(), transport: transport, store: MemoryStore(),
                                         clock: clock.wallClock, events: events, logger: logs.logger)
        let accounts = AccountsService(providers: providers, store: MemoryStore(), logger: logs.logger)
        await accounts.start()
        let cache = TokenCache()
        let refresher = Refresher(cache: cache, accounts: accounts, providers: providers, counters: BrokerCounters(),
                                  events: events, logger: logs.logger, clock: clock.wallClock)
        let ahead = RefreshAhead(tick: .seconds(1), refresher: refresher, providers: providers, clock: clock.wallClock,
                                 logger: logs.logger)
        let listener = RedirectAtTheDeadline()
        let signIns = SignInService(providers: providers, accounts: accounts, tokens: TokenForgetting(cache: cache, ahead: ahead),
                                    events: events, counters: BrokerCounters(), redirects: listener, announcer: nil,
                                    logger: logs.logger, clock: clock.wallClock)

        let started = try await signIns.startLogin(LoginStartParams(flow: .browser, timeout: 1))
        do {
            _ = try await signIns.waitLogin(LoginWaitParams(loginID: started.loginID))
            XCTFail("the sign-in went on past its deadline")
        } catch {
            XCTAssertTrue(error.message.contains("timed out before the browser came back"), error.message)
        }
        // The browser is told, not left with a closed connection.
        XCTAssertEqual(listener.pages.count, 1)
        XCTAssertEqual(listener.pages.first?.status, 400)
        XCTAssertTrue(listener.pages.first?.html.contains("timed out before the browser came back") == true)
    }
}
