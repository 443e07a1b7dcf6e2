@testable import BrokerCore
import BrokerProtocol
import XCTest

/// The daemon's sign-ins (`LoginSessions`): only running ones count against the cap, per
/// provider, and finished ones are kept for a late `login.wait` in a bounded store.
/// The sign-ins here are bare tasks (no provider): what is tested is the bookkeeping.
final class LoginSessionsTests: XCTestCase {
    private var now: Double { 1_000_000 }

    /// A sign-in whose task waits until it is cancelled, as one waiting for the user does.
    private func waiting(_ id: String, provider: String = "corp") -> LoginSession {
        let task = Task<AccountInfo, any Error> {
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            throw BrokerError.signInCancelled(provider)
        }
        return LoginSession(id: id, provider: provider, expiresAt: now + 300, task: task)
    }

    func testCancelledSignInsDoNotLockOutANewOne() async throws {
        let sessions = LoginSessions()
        // As 20 Ctrl-Cs on `authctl login`: each sign-in's only waiter goes away.
        for i in 0..<20 {
            let session = waiting("s\(i)")
            try sessions.add(session, now: now)
            session.attachWaiter()
            session.waiterLeft()
            _ = await session.task.result
        }
        XCTAssertNoThrow(try sessions.add(waiting("new"), now: now), "abandoned sign-ins must not hold a slot")
        await sessions.cancel(where: { _ in true }, because: "test over")
    }

    func testReplacedSignInsDoNotLockOutANewOne() async throws {
        let sessions = LoginSessions()
        for i in 0..<20 {
            await sessions.replace(provider: "corp")
            try sessions.add(waiting("s\(i)"), now: now)
        }
        await sessions.replace(provider: "corp")
        XCTAssertNoThrow(try sessions.add(waiting("new"), now: now))
        await sessions.cancel(where: { _ in true }, because: "test over")
    }

    func testRunningSignInsOfOneProviderDoNotLockOutAnother() async throws {
        let sessions = LoginSessions()
        var refused = false
        for i in 0..<20 {
            do { try sessions.add(waiting("a\(i)", provider: "a"), now: now) } catch { refused = true }
        }
        XCTAssertTrue(refused, "running sign-ins of one provider are capped")
        XCTAssertNoThrow(try sessions.add(waiting("b", provider: "b"), now: now), "the cap is per provider")
        await sessions.cancel(where: { _ in true }, because: "test over")
    }

    func testTheNewestFinishedSignInsStayForALateWaitAndTheStoreIsBounded() async throws {
        let sessions = LoginSessions()
        for i in 0..<200 {
            let session = waiting("s\(i)")
            try sessions.add(session, now: now)
            session.cancel(because: "done")
            _ = await session.task.result
            // The completion bookkeeping runs in a task of its own after the sign-in's task:
            // let each finish in turn, so that "newest" is s199, however loaded the machine
            // (tasks that settle in any order once made s0 one of the newest 32).
            for _ in 0..<3000 where sessions.inProgress > 0 {
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        XCTAssertNotNil(sessions.find(id: "s199", provider: nil), "the last finished sign-in stays for a late login.wait")
        XCTAssertNil(sessions.find(id: "s0", provider: nil), "finished sign-ins are not kept without bound")
    }
}
