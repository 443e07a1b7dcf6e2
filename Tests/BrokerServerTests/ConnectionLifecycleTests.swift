@testable import BrokerServer
import XCTest

/// Every transition of one connection's lifecycle, without a socket or a clock: the times
/// are the test's own (seconds, as nanoseconds).
final class ConnectionLifecycleTests: XCTestCase {
    private let s: UInt64 = 1_000_000_000
    private var limits: ConnectionLimits { .init(idleTimeout: 60 * s, stallTimeout: 10 * s) }

    private func fresh() -> ConnectionLifecycle { ConnectionLifecycle(limits: limits, now: 0) }

    func testANewConnectionIsIdleReadsWhatComesAndClosesAfterTheIdleTimeout() {
        var life = fresh()
        XCTAssertEqual(life.phase, .idle)
        XCTAssertEqual(life.inputArrived(), .read)
        XCTAssertEqual(life.nextDeadline, 60 * s)
        XCTAssertEqual(life.timeReached(59 * s), .none)
        XCTAssertEqual(life.timeReached(60 * s), .close(.idle))
    }

    func testInputWhileAnAnswerIsWorkedOnIsReadOnceItIsOut() {
        // The front door takes one request at a time: what comes meanwhile waits.
        var life = fresh()
        life.chunkRead(endsLine: true, hasNewline: true, now: 1 * s)
        life.answersOwed(true, now: 1 * s)
        XCTAssertEqual(life.phase, .answering)
        XCTAssertEqual(life.inputArrived(), .none)
        XCTAssertEqual(life.timeReached(300 * s), .none, "never idle while its answer is worked on")
        life.answersOwed(false, now: 300 * s)
        XCTAssertEqual(life.writeDrained(now: 300 * s), .read, "the answer is out: read what came")
        XCTAssertEqual(life.nextDeadline, 360 * s)
    }

    func testEachReadOrWriteStartsTheIdleTimeAfresh() {
        var life = fresh()
        life.chunkRead(endsLine: true, hasNewline: true, now: 50 * s)
        XCTAssertEqual(life.phase, .idle)
        XCTAssertEqual(life.timeReached(60 * s), .none)
        XCTAssertEqual(life.nextDeadline, 110 * s)
        life.writeBlocked(progress: false, now: 70 * s)
        XCTAssertEqual(life.writeDrained(now: 100 * s), .none)
        XCTAssertEqual(life.timeReached(150 * s), .none)
        XCTAssertEqual(life.timeReached(160 * s), .close(.idle))
    }

    func testAStartedLineMustFinishWithinTheStallTimeout() {
        var life = fresh()
        life.chunkRead(endsLine: false, hasNewline: false, now: 1 * s)
        XCTAssertEqual(life.phase, .reading)
        XCTAssertEqual(life.nextDeadline, 11 * s)
        // More of the same line does not restart its clock: a trickle is a stall too.
        life.chunkRead(endsLine: false, hasNewline: false, now: 5 * s)
        XCTAssertEqual(life.timeReached(10 * s), .none)
        XCTAssertEqual(life.timeReached(11 * s), .close(.lineUnfinished))
    }

    func testALineFinishedInTimeAndANewOneStartedInTheSameChunk() {
        var life = fresh()
        life.chunkRead(endsLine: false, hasNewline: false, now: 1 * s)
        life.chunkRead(endsLine: true, hasNewline: true, now: 2 * s)
        XCTAssertEqual(life.phase, .idle)
        XCTAssertEqual(life.timeReached(30 * s), .none)
        // The end of one line and the start of the next: the next one's clock starts now.
        life.chunkRead(endsLine: false, hasNewline: true, now: 40 * s)
        XCTAssertEqual(life.phase, .reading)
        XCTAssertEqual(life.timeReached(49 * s), .none)
        XCTAssertEqual(life.timeReached(50 * s), .close(.lineUnfinished))
    }

    func testTheTimeReadsAreHeldIsNotTheClientsStall() {
        var life = fresh()
        life.chunkRead(endsLine: false, hasNewline: false, now: 1 * s)
        life.readsHeld(true, now: 2 * s)
        XCTAssertEqual(life.timeReached(100 * s), .close(.idle), "held: only the idle rule applies")
        XCTAssertEqual(life.timeReached(30 * s), .none)
        life.readsHeld(false, now: 30 * s)
        XCTAssertEqual(life.timeReached(39 * s), .none)
        XCTAssertEqual(life.timeReached(40 * s), .close(.lineUnfinished))
    }

    func testAConnectionWithAnswersInTheWorksIsNeverIdle() {
        var life = fresh()
        life.answersOwed(true, now: 1 * s)
        XCTAssertEqual(life.phase, .answering)
        XCTAssertNil(life.nextDeadline)
        XCTAssertEqual(life.timeReached(3600 * s), .none)
        // Once answered, the idle time counts from the answer.
        life.answersOwed(false, now: 3600 * s)
        XCTAssertEqual(life.timeReached(3659 * s), .none)
        XCTAssertEqual(life.timeReached(3660 * s), .close(.idle))
    }

    func testInputWaitsWhileAnswersWaitForThePeerAndIsReadOnceTheyAreOut() {
        var life = fresh()
        life.writeBlocked(progress: false, now: 1 * s)
        XCTAssertEqual(life.phase, .waitingToWrite)
        XCTAssertEqual(life.inputArrived(), .none, "back-pressure: nothing is read while answers wait")
        XCTAssertEqual(life.writeDrained(now: 2 * s), .read)
        XCTAssertEqual(life.phase, .idle)
        XCTAssertEqual(life.writeDrained(now: 3 * s), .none, "the waiting input was read once")
    }

    func testAPeerThatTakesNoneOfItsAnswersIsClosedAfterTheStallTimeout() {
        var life = fresh()
        life.writeBlocked(progress: false, now: 1 * s)
        XCTAssertEqual(life.nextDeadline, 11 * s)
        XCTAssertEqual(life.timeReached(10 * s), .none)
        XCTAssertEqual(life.timeReached(11 * s), .close(.notReading))
    }

    func testTheStallOfAnswersCountsFromTheLastProgress() {
        var life = fresh()
        life.writeBlocked(progress: false, now: 1 * s)
        // A slow reader that keeps taking bytes gets a long answer whole.
        for t in stride(from: 5, through: 95, by: 5) { life.writeBlocked(progress: true, now: UInt64(t) * s) }
        XCTAssertEqual(life.timeReached(100 * s), .none)
        XCTAssertEqual(life.timeReached(105 * s), .close(.notReading))
        // A second partial write without progress does not restart the clock.
        life.writeBlocked(progress: false, now: 104 * s)
        XCTAssertEqual(life.timeReached(105 * s), .close(.notReading))
    }

    func testAPeerThatHangsUpIsClosedOnceNothingIsOwedToIt() {
        var life = fresh()
        life.peerClosedWriting()
        XCTAssertEqual(life.phase, .halfClosed)
        XCTAssertFalse(life.keepsOpenAfterPeerDone)
        XCTAssertEqual(life.settled(), .close(.peerFinished))
    }

    func testAHalfClosedPeerStillGetsItsAnswers() {
        var life = fresh()
        life.answersOwed(true, now: 0)
        life.peerClosedWriting()
        XCTAssertTrue(life.keepsOpenAfterPeerDone)
        XCTAssertEqual(life.settled(), .none)
        life.answersOwed(false, now: 1 * s)
        XCTAssertEqual(life.settled(), .close(.peerFinished))

        var writing = fresh()
        writing.writeBlocked(progress: false, now: 0)
        writing.peerClosedWriting()
        XCTAssertTrue(writing.keepsOpenAfterPeerDone)
        XCTAssertEqual(writing.settled(), .none)
        XCTAssertEqual(writing.writeDrained(now: 1 * s), .close(.peerFinished))
    }

    func testAHalfClosedPeerWithInputWaitingIsReadFirst() {
        var life = fresh()
        life.writeBlocked(progress: false, now: 0)
        XCTAssertEqual(life.inputArrived(), .none)
        life.peerClosedWriting()
        XCTAssertEqual(life.settled(), .none)
        XCTAssertEqual(life.writeDrained(now: 1 * s), .read)
        XCTAssertEqual(life.settled(), .close(.peerFinished))
    }

    func testHalfClosureIsNeededOnlyWhileSomethingIsOwed() {
        var life = fresh()
        XCTAssertFalse(life.keepsOpenAfterPeerDone)
        life.chunkRead(endsLine: false, hasNewline: false, now: 0)
        XCTAssertTrue(life.keepsOpenAfterPeerDone, "a started line")
        life.chunkRead(endsLine: true, hasNewline: true, now: 0)
        XCTAssertFalse(life.keepsOpenAfterPeerDone)
        life.readsHeld(true, now: 0)
        XCTAssertTrue(life.keepsOpenAfterPeerDone, "lines held unread")
        life.readsHeld(false, now: 0)
        XCTAssertFalse(life.keepsOpenAfterPeerDone)
    }

    func testTheLastAnswerClosesOnceItIsOut() {
        var life = fresh()
        life.closeAfterAnswer()
        life.writeBlocked(progress: false, now: 0)
        XCTAssertEqual(life.inputArrived(), .none)
        XCTAssertEqual(life.writeDrained(now: 1 * s), .close(.lastAnswerSent))

        var whole = fresh()
        whole.closeAfterAnswer()
        XCTAssertEqual(whole.writeDrained(now: 0), .close(.lastAnswerSent))
    }

    func testAClosedOrHandedOverConnectionDoesNothingMore() {
        for end in [ConnectionLifecycle.Phase.closed, .handedOver] {
            var life = fresh()
            life.writeBlocked(progress: false, now: 0)
            life.peerClosedWriting()
            if end == .closed { life.closed() } else { life.handedOver() }
            XCTAssertEqual(life.phase, end)
            XCTAssertNil(life.nextDeadline)
            XCTAssertEqual(life.timeReached(1000 * s), .none)
            XCTAssertEqual(life.inputArrived(), .none)
            XCTAssertEqual(life.writeDrained(now: 1), .none)
            XCTAssertEqual(life.settled(), .none)
        }
    }

    func testTheNextDeadlineIsTheEarliestRuleThatApplies() {
        var life = fresh()
        XCTAssertEqual(life.nextDeadline, 60 * s)
        life.chunkRead(endsLine: false, hasNewline: false, now: 55 * s)
        XCTAssertEqual(life.nextDeadline, 65 * s)
        life.chunkRead(endsLine: false, hasNewline: false, now: 56 * s)
        XCTAssertEqual(life.nextDeadline, 65 * s)
        life.readsHeld(true, now: 57 * s)
        XCTAssertEqual(life.nextDeadline, 116 * s)
        life.writeBlocked(progress: false, now: 58 * s)
        XCTAssertEqual(life.nextDeadline, 68 * s)
    }
}
