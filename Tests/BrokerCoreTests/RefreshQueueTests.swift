@testable import BrokerCore
import Synchronization
import XCTest

/// The refresh queue's promises: one refresh per key for concurrent callers, and never two
/// refreshes of one account at the same time.
final class RefreshQueueTests: XCTestCase {
    final class Probe: Sendable {
        let running = Atomic<Int>(0)
        let maxRunning = Atomic<Int>(0)
        let calls = Mutex<[String?]>([])
        /// Closed: a refresh that started waits until it opens, so that the test decides
        /// what is queued before any refresh ends, however slowly the machine runs it.
        let open = Atomic<Bool>(true)

        func operation(_ resource: String?) -> @Sendable () async throws(BrokerError) -> CachedToken {
            { () async throws(BrokerError) -> CachedToken in
                let now = self.running.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
                var seen = self.maxRunning.load(ordering: .sequentiallyConsistent)
                while now > seen {
                    let (exchanged, original) = self.maxRunning.compareExchange(expected: seen, desired: now, ordering: .sequentiallyConsistent)
                    if exchanged { break }
                    seen = original
                }
                self.calls.withLock { $0.append(resource) }
                while !self.open.load(ordering: .sequentiallyConsistent) { try? await Task.sleep(for: .milliseconds(1)) }
                try? await Task.sleep(for: .milliseconds(20))
                self.running.wrappingSubtract(1, ordering: .sequentiallyConsistent)
                return CachedToken(accessToken: "t-\(resource ?? "-")", tokenType: "Bearer", expiresAt: 1e10, scope: nil)
            }
        }
    }

    func testConcurrentCallersShareOneRefreshPerKeyAndNeverOverlap() async throws {
        let queue = RefreshQueue()
        let probe = Probe()
        let account = AccountKey(provider: "p", subject: "s")
        let resources = ["https://a", "https://b", "https://c"]
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<300 {
                let r = resources[i % resources.count]
                group.addTask {
                    let key = CacheKey(account: account, resource: r, scopes: [])
                    return try await queue.run(key, probe.operation(r)).accessToken
                }
            }
            var all: [String] = []
            for try await t in group { all.append(t) }
            return all
        }
        XCTAssertEqual(results.count, 300)
        XCTAssertEqual(Set(results), Set(resources.map { "t-\($0)" }))
        XCTAssertEqual(probe.calls.withLock { $0.count }, resources.count, "one refresh per resource")
        XCTAssertEqual(probe.maxRunning.load(ordering: .sequentiallyConsistent), 1, "refreshes of one account never overlap")
    }

    /// One connection queues 100 refreshes of distinct keys; another connection's refresh
    /// then takes the next turn instead of waiting behind all of them.
    func testTurnsGoRoundTheConnections() async throws {
        let queue = RefreshQueue()
        let probe = Probe()
        // No refresh of the flood ends before the other caller is queued behind it.
        probe.open.store(false, ordering: .sequentiallyConsistent)
        let account = AccountKey(provider: "p", subject: "s")
        let flood = 100
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<flood {
                group.addTask {
                    let key = CacheKey(account: account, resource: "https://flood/\(i)", scopes: [])
                    return try await queue.run(key, origin: 1, probe.operation("https://flood/\(i)")).accessToken
                }
            }
            // All of the flood waits (one of it runs) before the other caller asks.
            while await queue.waitingCount < flood - 1 { try await Task.sleep(for: .milliseconds(5)) }
            group.addTask {
                let key = CacheKey(account: account, resource: "https://other", scopes: [])
                return try await queue.run(key, origin: 2, probe.operation("https://other")).accessToken
            }
            while await queue.waitingCount < flood { try await Task.sleep(for: .milliseconds(5)) }
            probe.open.store(true, ordering: .sequentiallyConsistent)
            var all: [String] = []
            for try await t in group { all.append(t) }
            return all
        }
        XCTAssertEqual(results.count, flood + 1)
        let order = probe.calls.withLock { $0 }
        let position = try XCTUnwrap(order.firstIndex(of: "https://other"))
        print("the other connection's refresh ran as number \(position + 1) of \(order.count)")
        XCTAssertLessThanOrEqual(position, 2, "the other connection waited behind the flood")
        XCTAssertEqual(probe.maxRunning.load(ordering: .sequentiallyConsistent), 1, "refreshes of one account never overlap")
    }

    /// A caller that joined a refresh whose starter had spent its allowance of requests to
    /// the provider (`ProviderRequests`, another connection's) is not refused for it: it
    /// runs the refresh with its own allowance.
    func testAJoinerRunsTheRefreshWithItsOwnAllowanceWhenTheStartersIsSpent() async throws {
        let queue = RefreshQueue()
        let key = CacheKey(account: AccountKey(provider: "p", subject: "s"), resource: "https://a", scopes: [])
        let operation = { @Sendable () async throws(BrokerError) -> CachedToken in
            try ProviderRequests.charge()
            return CachedToken(accessToken: "t", tokenType: "Bearer", expiresAt: 1e10, scope: nil)
        }
        // The queue is busy, so the starter's refresh waits for its turn while the other joins.
        let (release, releaser) = AsyncStream<Void>.makeStream()
        let holding = Atomic(false)
        let holder = Task {
            await queue.exclusive {
                holding.store(true, ordering: .sequentiallyConsistent)
                for await _ in release { break }
            }
        }
        while !holding.load(ordering: .sequentiallyConsistent) { await Task.yield() }
        let starter = Task {
            try await ProviderRequests.$allowance.withValue(Allowance(spent: true)) { try await queue.run(key, origin: 1, operation) }
        }
        while await queue.waitingCount < 1 { await Task.yield() }
        let own = Allowance(spent: false)
        let joiner = Task {
            try await ProviderRequests.$allowance.withValue(own) { try await queue.run(key, origin: 2, operation) }
        }
        while await queue.joins < 1 { await Task.yield() }
        releaser.finish()
        await holder.value
        do {
            _ = try await starter.value
            XCTFail("the starter's allowance is spent")
        } catch {
            XCTAssertEqual(error as? BrokerError, .providerRequestsSpent(limit: 1, retryAfter: 60))
        }
        let token = try await joiner.value
        XCTAssertEqual(token.accessToken, "t")
        XCTAssertEqual(own.taken.withLock { $0 }, 1, "the joiner paid for the refresh it ran")
    }

    /// A STUB allowance: spent, or counting what is taken.
    final class Allowance: ProviderRequestAllowance {
        let spent: Bool
        let taken = Mutex(0)
        init(spent: Bool) { self.spent = spent }
        func take() -> ProviderRequestsSpent? {
            if spent { return ProviderRequestsSpent(limit: 1, retryAfter: 60) }
            taken.withLock { $0 += 1 }
            return nil
        }
    }

    func testScopeOrderDoesNotSplitTheCache() {
        let a = AccountKey(provider: "p", subject: "s")
        XCTAssertEqual(CacheKey(account: a, resource: "r", scopes: ["b", "a", "a"]), CacheKey(account: a, resource: "r", scopes: ["a", "b"]))
        XCTAssertNotEqual(CacheKey(account: a, resource: "r", scopes: []), CacheKey(account: a, resource: "q", scopes: []))
    }

    func testCacheServesOnlyTokensWithEnoughLifeLeft() {
        let cache = TokenCache()
        let key = CacheKey(account: AccountKey(provider: "p", subject: "s"), resource: "r", scopes: [])
        cache.store(CachedToken(accessToken: "x", tokenType: "Bearer", expiresAt: 1000, scope: nil), for: key, now: 0)
        XCTAssertNotNil(cache.lookup(key, now: 900, minimumLife: 60))
        XCTAssertNil(cache.lookup(key, now: 950, minimumLife: 60), "less than the margin left: refresh first")
        XCTAssertNil(cache.lookup(key, now: 900, minimumLife: 200), "min_ttl above what is left")
    }

    func testExpiredTokensAreDroppedAsNewKeysArrive() {
        let cache = TokenCache()
        let account = AccountKey(provider: "p", subject: "s")
        func key(_ i: Int) -> CacheKey { CacheKey(account: account, resource: "r", scopes: ["s\(i)"]) }
        // Tokens for ever new keys, each living 100 s, one stored per second: a daemon asked
        // for many (resource, scopes) over a long session.
        for i in 0..<(TokenCache.firstSweep * 4) {
            cache.store(CachedToken(accessToken: "t\(i)", tokenType: "Bearer", expiresAt: Double(i + 100), scope: nil), for: key(i), now: Double(i))
        }
        XCTAssertLessThan(cache.count, TokenCache.firstSweep, "only tokens that can still be served are kept")
        let last = TokenCache.firstSweep * 4 - 1
        XCTAssertNotNil(cache.lookup(key(last), now: Double(last), minimumLife: 60), "a live token is never dropped")
        XCTAssertNotNil(cache.lookup(key(last - 30), now: Double(last), minimumLife: 60))
    }
}
