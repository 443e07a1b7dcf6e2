@testable import BrokerCore
import BrokerProtocol
@testable import BrokerServer
import Foundation
import Logging
import SecretStore
import Synchronization
import XCTest

/// The front door's memo of cache hits' answers (`AnswerMemo`), over a real broker's method
/// table and a real Unix socket: the same request is answered with exactly the bytes the
/// full path writes, whatever its id, and never once the answer no longer stands — a token
/// replaced, rejected or signed out, a reload, the token's life running short. The broker's
/// provider is the STUB that cannot be reached: a request the cache cannot answer goes to
/// NIO (recorded by the rig), which is how a miss shows here. An answer from the memo shows
/// as its stamp asked and standing (`memoAnswers`): only the memo asks it.
final class AnswerMemoTests: XCTestCase {
    /// A clock the test moves.
    final class Clock: Sendable {
        private let seconds = Mutex<Double>(1_800_000_000)
        var now: Double { seconds.withLock { $0 } }
        var wall: WallClock { WallClock { [self] in now } }
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
    }

    static let alice = AccountKey(provider: "corp", subject: "sub-alice")
    static let api = TokenGetParams(resource: "https://api")

    /// Resources beside https://api and https://git: one more than the memo keeps answers.
    static let others = (0...AnswerMemo.capacity).map { "https://r\($0)" }

    static func config(margin: Int) -> String {
        """
        [daemon]
        store = "memory"
        refresh_margin = \(margin)

        [providers.corp]
        issuer = "https://idp.example"
        client_id = "authbroker"
        resources = ["https://api", "https://git", \(others.map { "\"\($0)\"" }.joined(separator: ", "))]
        """
    }

    /// Counts the stamps asked that stood: the answers the memo gave.
    final class Asked: Sendable {
        private let count = Mutex(0)
        var stood: Int { count.withLock { $0 } }
        func add() { count.withLock { $0 += 1 } }
    }

    let clock = Clock()
    let asked = Asked()
    var broker: Broker!
    /// The broker's token cache, which `cache(_:for:)` fills as a refresh does.
    let tokenCache = TokenCache()
    var rig: FrontDoorRig!

    /// A broker with alice signed in (from the store, as after a restart) and a token for
    /// https://api cached, and a front door over its methods.
    override func setUp() async throws {
        let store = MemoryStore()
        let account = Account(key: Self.alice, issuer: "https://idp.example", clientID: "authbroker", username: "alice",
                              refreshToken: "refresh-0", idToken: nil, state: .ready)
        try await store.save(AccountSecret.credential(for: account))
        broker = try testBroker(Self.config(margin: 60), store: store, clock: clock.wall, cache: tokenCache)
        await broker.start()
        cache("token-1", for: "https://api")
        var table = MethodTable.broker(broker)
        let stillServes = try XCTUnwrap(table.stillServes)
        let asked = self.asked
        table.stillServes = { stamp in
            let stands = stillServes(stamp)
            if stands { asked.add() }
            return stands
        }
        rig = try FrontDoorRig(table: table, counters: broker.counters)
    }

    /// How many answers the memo gave.
    private var memoAnswers: Int { asked.stood }

    override func tearDown() {
        rig = nil
        broker = nil
    }

    /// Puts a token that lives an hour (or `life` seconds) in the cache, as a refresh does.
    private func cache(_ token: String, for resource: String, life: Double = 3600) {
        tokenCache.store(CachedToken(accessToken: token, tokenType: "Bearer", expiresAt: clock.now + life),
                         for: CacheKey(account: Self.alice, resource: resource, scopes: []), now: clock.now)
    }

    private static func line(id: String, resource: String = "https://api") -> Data {
        Data(#"{"jsonrpc":"2.0","id":\#(id),"method":"token.get","params":{"resource":"\#(resource)"}}"#.utf8 + [0x0A])
    }

    /// The answer the full path writes for `params` with `id` now.
    private func fullAnswer(_ id: RequestID, _ params: TokenGetParams = api) throws -> String {
        let result = try XCTUnwrap(broker.tokens.cachedToken(params), "a cache hit")
        return String(decoding: RPCCodec().success(id, result), as: UTF8.self)
    }

    private func ask(_ client: FileHandle, id: String, resource: String = "https://api") -> String? {
        client.send(Self.line(id: id, resource: resource))
        return client.readLines(1).first
    }

    private var handovers: Int { rig.handovers.withLock { $0.count } }

    func testTheSameRequestIsAnsweredWithTheFullPathsBytesWhateverItsID() throws {
        let client = try rig.connect()
        let ids: [(String, RequestID)] = [
            ("1", .number(1)), ("2", .number(2)), ("-0", .number(0)), ("-7", .number(-7)),
            ("123456789012345678", .number(123_456_789_012_345_678)), (#""abc""#, .string("abc")), (#""""#, .string("")),
            (#""a/b c""#, .string("a/b c")), ("null", .null), ("1", .number(1)), ("1 ", .number(1)), ("2", .number(2)),
        ]
        for (text, id) in ids {
            let got = ask(client, id: text)
            XCTAssertEqual(got, try fullAnswer(id), "id \(text)")
        }
        XCTAssertEqual(handovers, 0)
        // A new connection asking the same is answered the same.
        let other = try rig.connect()
        XCTAssertEqual(ask(other, id: "9"), try fullAnswer(.number(9)))
    }

    func testAnIDTheScannerDoesNotReadGoesToNIOAsBefore() throws {
        let client = try rig.connect()
        XCTAssertNotNil(ask(client, id: "1"))
        // Nineteen digits, a fraction, an escape: not ids the fast path reads.
        for id in ["1234567890123456789", "1.5", #""a\"b""#, "01", "[1]"] {
            let other = try rig.connect()
            other.send(Self.line(id: id))
            XCTAssertTrue(other.closedByPeer(), "id \(id): handed over")
        }
        XCTAssertEqual(handovers, 5)
    }

    func testAnAnswerLargerThanTheSocketTakesAtOnceArrivesWholeAndIsNotKept() throws {
        // A 1 MiB token: each answer waits for the socket to drain, in parts. The memo keeps
        // no answer that large (its memory stays small): the full path writes each.
        cache(String(repeating: "t", count: 1 << 20), for: "https://api")
        let client = try rig.connect()
        for id in 1...3 {
            XCTAssertEqual(ask(client, id: "\(id)"), try fullAnswer(.number(Int64(id))), "answer \(id)")
        }
        XCTAssertEqual(handovers, 0)
        XCTAssertEqual(memoAnswers, 0)
    }

    func testAnAnswerAsLargeAsTheMemoKeepsIsAnsweredFromIt() throws {
        // The largest answer kept, the line and the id aside; one byte more is not kept.
        let fixed = try fullAnswer(.number(1)).utf8.count - "token-1".utf8.count - #"{"jsonrpc":"2.0","id":1"#.utf8.count
        let line = Self.line(id: "1").count - 1 - 1  // the newline and the id aside
        let largest = AnswerMemo.largestKept - line - fixed - 1
        for (size, kept) in [(largest, true), (largest + 1, false)] {
            cache(String(repeating: "t", count: size), for: "https://api")
            let before = memoAnswers
            let client = try rig.connect()
            for id in 1...3 { XCTAssertEqual(ask(client, id: "\(id)"), try fullAnswer(.number(Int64(id))), "\(size): answer \(id)") }
            XCTAssertEqual(memoAnswers - before, kept ? 2 : 0, "a token of \(size) bytes")
        }
    }

    func testEachAnswerCountsAsARequestAndACacheHit() throws {
        let before = broker.counters.snapshot()
        let client = try rig.connect()
        for id in 1...5 { XCTAssertNotNil(ask(client, id: "\(id)")) }
        let after = broker.counters.snapshot()
        XCTAssertEqual(after.requests - before.requests, 5)
        XCTAssertEqual(after.tokenRequests - before.tokenRequests, 5)
        XCTAssertEqual(after.cacheHits - before.cacheHits, 5)
    }

    func testADifferentRequestGetsItsOwnAnswer() throws {
        cache("token-git", for: "https://git")
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1"), try fullAnswer(.number(1)))
        XCTAssertEqual(ask(client, id: "2", resource: "https://git"), try fullAnswer(.number(2), TokenGetParams(resource: "https://git")))
        XCTAssertEqual(ask(client, id: "3"), try fullAnswer(.number(3)))
        XCTAssertTrue(try fullAnswer(.number(3)).contains("token-1"))
    }

    func testTwoRequestsInTurnOnOneConnectionAreEachAnsweredFromTheMemoOnceKept() throws {
        cache("token-git", for: "https://git")
        let git = TokenGetParams(resource: "https://git")
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1"), try fullAnswer(.number(1)))
        XCTAssertEqual(ask(client, id: "2", resource: "https://git"), try fullAnswer(.number(2), git))
        XCTAssertEqual(memoAnswers, 0, "each kept by the full path")
        for id in stride(from: 3, to: 11, by: 2) {
            XCTAssertEqual(ask(client, id: "\(id)"), try fullAnswer(.number(Int64(id))))
            XCTAssertEqual(ask(client, id: "\(id + 1)", resource: "https://git"), try fullAnswer(.number(Int64(id + 1)), git))
        }
        XCTAssertEqual(memoAnswers, 8)
        XCTAssertEqual(handovers, 0)
    }

    func testTwoCallersOnTheirOwnConnectionsAreEachAnsweredFromTheMemoOnceKept() throws {
        cache("token-git", for: "https://git")
        let git = TokenGetParams(resource: "https://git")
        let kubectl = try rig.connect()
        let gitHelper = try rig.connect()
        for id in 1...5 {
            XCTAssertEqual(ask(kubectl, id: "\(id)"), try fullAnswer(.number(Int64(id))))
            XCTAssertEqual(ask(gitHelper, id: #""g\#(id)""#, resource: "https://git"), try fullAnswer(.string("g\(id)"), git))
        }
        XCTAssertEqual(memoAnswers, 8, "all but the first of each")
    }

    func testEachRequestsAnswerStandsOrFallsWithItsOwnToken() throws {
        cache("token-git", for: "https://git", life: 600)
        let git = TokenGetParams(resource: "https://git")
        let client = try rig.connect()
        _ = ask(client, id: "1")
        _ = ask(client, id: "2", resource: "https://git")
        // git's token is replaced (a refresh): its new token is answered at once, and api's
        // answer is the full path's, still token-1.
        cache("token-git-2", for: "https://git", life: 600)
        XCTAssertEqual(ask(client, id: "3", resource: "https://git"), try fullAnswer(.number(3), git))
        XCTAssertEqual(ask(client, id: "4"), try fullAnswer(.number(4)))
        XCTAssertTrue(try fullAnswer(.number(3), git).contains("token-git-2"))
        XCTAssertTrue(try fullAnswer(.number(4)).contains("token-1"))
        let before = memoAnswers
        XCTAssertEqual(ask(client, id: "5", resource: "https://git"), try fullAnswer(.number(5), git))
        XCTAssertEqual(ask(client, id: "6"), try fullAnswer(.number(6)))
        XCTAssertEqual(memoAnswers - before, 2, "both kept again")
        // git's token's life runs short (inside the margin): git's request is not answered
        // again, while api's, whose token has the life, is, from the memo.
        clock.advance(600 - 60)
        XCTAssertEqual(ask(client, id: "7"), try fullAnswer(.number(7)))
        XCTAssertEqual(memoAnswers - before, 3)
        let before8 = memoAnswers
        XCTAssertEqual(ask(client, id: "8", resource: "https://git")?.contains(#""id":8"#), true,
                       "a miss: a refresh (which the STUB provider fails: the token still lives, and is served)")
        XCTAssertEqual(memoAnswers, before8, "not from the memo")
        XCTAssertEqual(handovers, 0, "worked on by the front door itself")
    }

    func testTheLeastRecentlyUsedAnswerIsTheOneDropped() throws {
        for resource in Self.others { cache("token-\(resource.suffix(2))", for: resource) }
        let client = try rig.connect()
        var id = 0
        /// Asks for `resource`'s token; whether the memo answered it.
        func fromMemo(_ resource: String) throws -> Bool {
            id += 1
            let before = memoAnswers
            XCTAssertEqual(ask(client, id: "\(id)", resource: resource), try fullAnswer(.number(Int64(id)), TokenGetParams(resource: resource)))
            return memoAnswers > before
        }
        let kept = Self.others.prefix(AnswerMemo.capacity)
        for resource in kept { XCTAssertFalse(try fromMemo(resource), resource) }
        // The first kept is used again: the second is now the least recently used.
        XCTAssertTrue(try fromMemo(kept[0]))
        let extra = try XCTUnwrap(Self.others.last)
        XCTAssertFalse(try fromMemo(extra), "one more than the memo keeps")
        for resource in kept where resource != kept[1] { XCTAssertTrue(try fromMemo(resource), resource) }
        XCTAssertTrue(try fromMemo(extra))
        XCTAssertFalse(try fromMemo(kept[1]), "the one dropped")
        XCTAssertEqual(handovers, 0)
    }

    func testATokenReplacedInTheCacheIsAnsweredAtOnce() throws {
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1")?.contains("token-1"), true)
        cache("token-2", for: "https://api")  // a refresh
        XCTAssertEqual(ask(client, id: "2"), try fullAnswer(.number(2)))
        XCTAssertEqual(ask(client, id: "3")?.contains("token-2"), true)
    }

    /// Asks once (token-1 answered, and kept), makes `change`, and asks the same again: the
    /// request is not answered from the memo but by the full path (a miss's refresh, which
    /// the STUB provider fails, or no account's error).
    private func assertNotFromMemoAfter(_ change: () async throws -> Void, _ why: String, expectError: Bool = true,
                                        file: StaticString = #filePath, line: UInt = #line) async throws {
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1")?.contains("token-1"), true, file: file, line: line)
        try await change()
        let before = memoAnswers
        let reply = ask(client, id: "2") ?? ""
        XCTAssertTrue(reply.contains(#""id":2"#) && (expectError ? reply.contains(#""error""#) : true), why + ": " + reply, file: file, line: line)
        XCTAssertEqual(memoAnswers, before, "not from the memo: " + why, file: file, line: line)
    }

    func testARejectedTokenIsNotAnsweredAgain() async throws {
        try await assertNotFromMemoAfter({
            XCTAssertEqual(try broker.tokens.rejectToken(TokenRejectParams(accessToken: "token-1")), TokenRejectResult(dropped: true))
        }, "a miss: a refresh")
    }

    func testASignedOutAccountsTokenIsNotAnsweredAgain() async throws {
        try await assertNotFromMemoAfter({
            _ = try await broker.signOut.logout(LogoutParams(local: true))
        }, "no account: the error")
    }

    func testAfterAReloadTheRequestIsAnsweredAsTheNewConfigurationSays() async throws {
        // A margin longer than the token's life: the cache no longer serves it.
        try await assertNotFromMemoAfter({
            _ = try await broker.reload(try ConfigLoader.parse(Self.config(margin: 3700), file: "config.toml"))
        }, "a miss: a refresh (the STUB provider fails it; the token still lives and is served)", expectError: false)
    }

    func testOnceRulesAreInForceTheRequestGoesToNIOAndItsGate() async throws {
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1")?.contains("token-1"), true)
        _ = try await broker.reload(try ConfigLoader.parse(Self.config(margin: 60) + """

            [[allow]]
            exe = "/usr/bin/git"
            resources = ["https://api"]
            """, file: "config.toml"))
        client.send(Self.line(id: "2"))
        XCTAssertTrue(client.closedByPeer(), "under rules every request is NIO's, where the caller is identified")
        XCTAssertEqual(handovers, 1)
        XCTAssertEqual(rig.handovers.withLock { $0.first?.unread?.readableBytes }, Self.line(id: "2").count, "unread")
    }

    func testATokenWhoseLifeRanShortIsNotAnsweredAgain() throws {
        let client = try rig.connect()
        XCTAssertEqual(ask(client, id: "1")?.contains("token-1"), true)
        // Seconds later, the same bytes (the answer holds no time of its own).
        clock.advance(2.5)
        XCTAssertEqual(ask(client, id: "2"), try fullAnswer(.number(2)))
        // Inside the margin: the cache would refresh it.
        clock.advance(3600 - 60 - 2.5)
        let before = memoAnswers
        XCTAssertEqual(ask(client, id: "3")?.contains(#""id":3"#), true, "a miss: a refresh (the STUB provider fails it; the token still lives and is served)")
        XCTAssertEqual(memoAnswers, before, "not from the memo")
    }
}
