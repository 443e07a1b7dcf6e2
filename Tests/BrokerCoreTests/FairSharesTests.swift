@testable import BrokerCore
import BrokerProtocol
import Foundation
import XCTest

/// Issue 38 item 3: what is limited for all programs together (the questions waiting on the
/// desktop, an account's `max_tokens_per_account`) is shared fairly between programs, so
/// that one program's flood never refuses another program's first question or token. Two
/// programs here are two callers with different `ProgramShare`s, as the server sets them
/// (`LaterWork.run`: the executable's file under rules, else the process).
final class FairSharesTests: XCTestCase {
    private let git = ProgramShare.executable(device: 8, inode: 100)
    private let flooder = ProgramShare.executable(device: 8, inode: 200)

    // MARK: questions on the desktop

    func testOneProgramsQuestionsFillItsOwnShareOnly() {
        var shares = QuestionShares()
        XCTAssertNil(shares.take(for: flooder))
        XCTAssertNil(shares.take(for: flooder))
        // Its third is refused for being its own, however much room is left in all.
        XCTAssertEqual(shares.take(for: flooder), .programBusy(2))
        XCTAssertEqual(shares.waiting, 2)
        // Another program's first question is asked.
        XCTAssertNil(shares.take(for: git))
        XCTAssertEqual(shares.waiting(of: git), 1)
        // A new process of the flooding program is the same program (its file).
        XCTAssertEqual(shares.take(for: .executable(device: 8, inode: 200)), .programBusy(2))
        // An answered question gives its place back.
        shares.give(back: flooder)
        XCTAssertNil(shares.take(for: flooder))
    }

    func testAllTogetherAreCappedAndTheProgramsOwnCapIsCheckedFirst() {
        var shares = QuestionShares()
        for program in 1...4 {
            for _ in 0..<2 { XCTAssertNil(shares.take(for: .process(Int32(program)))) }
        }
        XCTAssertEqual(shares.waiting, 8)
        XCTAssertEqual(shares.take(for: .process(5)), .busy(8), "a fifth program, with all 8 waiting")
        XCTAssertEqual(shares.take(for: .process(1)), .programBusy(2), "a program with its share waiting is told so first")
        shares.give(back: .process(3))
        XCTAssertNil(shares.take(for: .process(5)))
        // Unknown programs share one place among them.
        var unknown = QuestionShares()
        XCTAssertNil(unknown.take(for: nil))
        XCTAssertNil(unknown.take(for: nil))
        XCTAssertEqual(unknown.take(for: nil), .programBusy(2))
        // Giving back what was never taken changes nothing.
        unknown.give(back: git)
        XCTAssertEqual(unknown.waiting, 2)
    }

    func testTheRefusalNamesTheProgramAndSaysOthersAreStillAsked() async {
        struct Busy: CallerConfirming {
            func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer { .programBusy(2) }
        }
        let gate = CallerGate(source: FixedPolicy(), confirmer: Busy(), logger: .init(label: "test"))
        let lookup = Requester.Lookup(share: flooder) { RequestingProgram(executable: "/usr/bin/flood", pid: 42, forwarded: false) }
        let error: BrokerError? = await Requester.$lookup.withValue(lookup) {
            do throws(BrokerError) {
                try await gate.confirm(ConfirmQuestion(provider: "corp", resource: "https://api"), on: ConfirmAnswers())
                return nil
            } catch { return error }
        }
        guard case .overloaded(let message)? = error else { return XCTFail("\(String(describing: error))") }
        XCTAssertTrue(message.contains("2 questions of flood (pid 42)"), message)
        XCTAssertTrue(message.contains("other programs are still asked"), message)
        let shown = Requester.$lookup.withValue(lookup) { Requester.program }
        XCTAssertEqual(shown?.share, flooder, "the program shown carries the share the server set")
    }

    func testAConnectionsShareIsItsFileUnderRulesAndItsProcessOtherwise() {
        let file = FileID(device: 8, inode: 300, stamp: 5)
        XCTAssertEqual(ProgramShare(pid: 7, executable: file, forwarded: false), .executable(device: 8, inode: 300))
        XCTAssertEqual(ProgramShare(pid: 7, executable: nil, forwarded: false), .process(7))
        XCTAssertEqual(ProgramShare(pid: 7, executable: file, forwarded: true), .process(7), "a forward is its own program, not ssh")
        XCTAssertEqual(RequestingProgram(executable: "/usr/bin/git", pid: 9, forwarded: false).share, .process(9))
    }

    // MARK: max_tokens_per_account

    private func token(_ h: BrokerHarness, _ org: String, as program: ProgramShare) async -> BrokerError? {
        await Requester.$lookup.withValue(Requester.Lookup(share: program) { nil }) {
            do throws(BrokerError) {
                _ = try await h.token(TokenGetParams(resource: "https://api", params: ["organization_id": org]))
                return nil
            } catch { return error }
        }
    }

    /// The case: one program fills the account's `max_tokens_per_account`; another
    /// program's first token was refused until those expired. Now the program holding the
    /// most pays with its least recently used token, and the flooder is refused at its own
    /// share, without a provider request.
    func testOneProgramsFloodOfTokensNeverRefusesAnotherProgramsFirst() async throws {
        let h = try await BrokerHarness(providerKeys: """
            caller_params = ["organization_id"]
            access_tokens = "independent"
            max_tokens_per_account = 4
            """)
        for i in 0..<4 {
            let refused = await token(h, "flood-\(i)", as: flooder)
            XCTAssertNil(refused)
            h.clock.advance(1)
        }
        // The flooder's 5th is refused: it holds the most (all) of the account's tokens.
        guard case .overloaded(let message)? = await token(h, "flood-4", as: flooder) else { return XCTFail("the flooder went past the cap") }
        XCTAssertTrue(message.contains("max_tokens_per_account") && message.contains("no other program holds more"), message)
        XCTAssertEqual(h.transport.tokenRequests.count, 4, "no provider request for a refusal")
        // flood-0 is used again (a cache hit): flood-1 is now its least recently used.
        let hit = await token(h, "flood-0", as: flooder)
        XCTAssertNil(hit)
        XCTAssertEqual(h.transport.tokenRequests.count, 4)
        h.clock.advance(1)

        // Another program's first token is served: the flooder's least recently used one makes room.
        let first = await token(h, "git-0", as: git)
        XCTAssertNil(first, "another program's first token was refused")
        XCTAssertEqual(h.transport.tokenRequests.count, 5)
        // Whether the key is still cached: the cache-hit path's answer (which a request at once gets).
        let key = { (org: String) in TokenGetParams(resource: "https://api", params: ["organization_id": org]) }
        XCTAssertNil(h.broker.tokens.cachedToken(key("flood-1")), "the flooder's least recently used token went")
        XCTAssertNotNil(h.broker.tokens.cachedToken(key("flood-0")), "the one it used again stays")
        // Its second too (the flooder still holds more); at an equal share it is refused in turn.
        let second = await token(h, "git-1", as: git)
        XCTAssertNil(second)
        guard case .overloaded? = await token(h, "git-2", as: git) else { return XCTFail("an equal share took from the other program") }
        // And the flooder cannot take them back: it holds no more than an equal share either.
        guard case .overloaded? = await token(h, "flood-9", as: flooder) else { return XCTFail("the flooder took another program's token") }
        for org in ["git-0", "git-1"] {
            XCTAssertNotNil(h.broker.tokens.cachedToken(key(org)), org)
        }
        XCTAssertEqual(h.transport.tokenRequests.count, 6)
    }

    /// A background refresh (no program asks) keeps the token's owner; tokens of unknown
    /// owners are one program's, so a caller the server did not name (no share) is held to
    /// the cap as before.
    func testABackgroundRefreshKeepsTheOwner() {
        let cache = TokenCache()
        let account = AccountKey(provider: "corp", subject: "s")
        let key = CacheKey(account: account, resource: "https://api", scopes: [])
        cache.store(CachedToken(accessToken: "a", tokenType: "Bearer", expiresAt: 100), for: key, now: 0, owner: git)
        cache.store(CachedToken(accessToken: "b", tokenType: "Bearer", expiresAt: 200), for: key, now: 1, owner: nil)
        XCTAssertEqual(cache.lookup(key, now: 2, minimumLife: 0)?.owner, git)
        let other = CacheKey(account: account, resource: "https://git", scopes: [])
        XCTAssertTrue(cache.makeRoom(for: key, owner: flooder, limit: 1, now: 2), "a key held always has room")
        XCTAssertFalse(cache.makeRoom(for: other, owner: git, limit: 1, now: 2), "git holds the one token: its own share")
        XCTAssertTrue(cache.makeRoom(for: other, owner: flooder, limit: 1, now: 2), "git holds more than the flooder")
        XCTAssertNil(cache.lookup(key, now: 2, minimumLife: 0), "git's token made the room")
    }
}
