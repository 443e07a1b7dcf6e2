@testable import BrokerServer
import Testing

/// The lifecycle's transitions as tables, without a socket or a clock: a sequence of
/// events, and the state, action, timeout or close decision it must lead to. Times are
/// plain seconds here (the lifecycle only adds and compares them): idle after 60, stalled
/// after 10.
@Suite struct ConnectionLifecycleTransitionTests {
    typealias Life = ConnectionLifecycle
    typealias State = ConnectionLifecycle.State
    typealias Action = ConnectionLifecycle.Action

    static let limits = ConnectionLimits(idleTimeout: 60, stallTimeout: 10)

    /// One event a holder reports.
    enum Step: Sendable, CustomStringConvertible {
        case input
        case chunk(endsLine: Bool, newline: Bool, at: UInt64)
        /// A chunk that is whole lines.
        case line(at: UInt64)
        case wrote(at: UInt64)
        case peerDone
        case held(Bool, at: UInt64)
        case owed(Bool, at: UInt64)
        case lastAnswer
        case blocked(progress: Bool, at: UInt64)
        case drained(at: UInt64)
        case closed, handedOver

        /// A line started, in a chunk without a newline.
        static func part(at t: UInt64) -> Step { .chunk(endsLine: false, newline: false, at: t) }

        /// Reports the event; the action, for the events that return one.
        func apply(to life: inout Life) -> Action? {
            switch self {
            case .input: return life.inputArrived()
            case .chunk(let ends, let newline, let t): life.chunkRead(endsLine: ends, hasNewline: newline, now: t)
            case .line(let t): life.chunkRead(endsLine: true, hasNewline: true, now: t)
            case .wrote(let t): life.wrote(now: t)
            case .peerDone: life.peerClosedWriting()
            case .held(let held, let t): life.readsHeld(held, now: t)
            case .owed(let owed, let t): life.answersOwed(owed, now: t)
            case .lastAnswer: life.closeAfterAnswer()
            case .blocked(let progress, let t): life.writeBlocked(progress: progress, now: t)
            case .drained(let t): return life.writeDrained(now: t)
            case .closed: life.closed()
            case .handedOver: life.handedOver()
            }
            return nil
        }

        var description: String {
            switch self {
            case .input: "input"
            case .chunk(let ends, let newline, let t): "chunk(endsLine: \(ends), newline: \(newline))@\(t)"
            case .line(let t): "line@\(t)"
            case .wrote(let t): "wrote@\(t)"
            case .peerDone: "peerDone"
            case .held(let held, let t): "held(\(held))@\(t)"
            case .owed(let owed, let t): "owed(\(owed))@\(t)"
            case .lastAnswer: "lastAnswer"
            case .blocked(let progress, let t): "blocked(progress: \(progress))@\(t)"
            case .drained(let t): "drained@\(t)"
            case .closed: "closed"
            case .handedOver: "handedOver"
            }
        }
    }

    /// The lifecycle of a connection opened at 0 after `steps`, and the last step's action.
    static func run(_ steps: [Step]) -> (Life, Action?) {
        var life = Life(limits: limits, now: 0)
        var last: Action?
        for step in steps { last = step.apply(to: &life) }
        return (life, last)
    }

    static func open(_ input: Life.Input = .betweenLines, _ work: Life.Work = .none(lastActive: 0),
                     _ output: Life.Output = .drained, _ peer: Life.Peer = .sending) -> State {
        .open(Life.Open(input: input, work: work, output: output, peer: peer))
    }

    // MARK: Transitions

    static let transitions: [([Step], State, Action?)] = [
        ([], open(), nil),
        ([.input], open(), .read),
        ([.line(at: 5)], open(.betweenLines, .none(lastActive: 5)), nil),
        // A line started; more of it does not restart its clock (a trickle is a stall too).
        ([.part(at: 1)], open(.line(since: 1), .none(lastActive: 1)), nil),
        ([.part(at: 1), .part(at: 5)], open(.line(since: 1), .none(lastActive: 5)), nil),
        // The end of one line and the start of the next: the next one's clock starts now.
        ([.part(at: 1), .chunk(endsLine: false, newline: true, at: 5)], open(.line(since: 5), .none(lastActive: 5)), nil),
        ([.part(at: 1), .line(at: 5)], open(.betweenLines, .none(lastActive: 5)), nil),
        // Reads held during a started line, then resumed: its stall counts afresh.
        ([.part(at: 1), .held(true, at: 2)], open(.held(midLine: true), .none(lastActive: 1)), nil),
        ([.part(at: 1), .held(true, at: 2), .held(false, at: 30)], open(.line(since: 30), .none(lastActive: 1)), nil),
        ([.held(true, at: 2)], open(.held(midLine: false)), nil),
        ([.held(true, at: 2), .held(false, at: 3)], open(), nil),
        ([.held(true, at: 2), .part(at: 3)], open(.held(midLine: true), .none(lastActive: 3)), nil),
        ([.held(true, at: 2), .part(at: 3), .line(at: 4)], open(.held(midLine: false), .none(lastActive: 4)), nil),
        ([.held(true, at: 2), .part(at: 3), .held(false, at: 9)], open(.line(since: 9), .none(lastActive: 3)), nil),
        // Input while an answer is worked on waits until the answer is out.
        ([.line(at: 1), .owed(true, at: 1), .input], open(.waiting(midLine: false), .answering), Action.none),
        ([.line(at: 1), .owed(true, at: 1), .input, .owed(false, at: 300)], open(.waiting(midLine: false), .none(lastActive: 300)), nil),
        ([.line(at: 1), .owed(true, at: 1), .input, .owed(false, at: 300), .drained(at: 300)], open(.betweenLines, .none(lastActive: 300)), .read),
        ([.owed(true, at: 1), .owed(true, at: 2)], open(.betweenLines, .answering), nil),
        ([.owed(false, at: 5)], open(), nil),
        // Input while answers wait for the peer (back-pressure) waits until they are out.
        ([.blocked(progress: false, at: 1), .input], open(.waiting(midLine: false), .none(lastActive: 0), .blocked(since: 1)), Action.none),
        ([.blocked(progress: false, at: 1), .input, .drained(at: 2)], open(.betweenLines, .none(lastActive: 2)), .read),
        ([.blocked(progress: false, at: 1), .input, .drained(at: 2), .drained(at: 3)], open(.betweenLines, .none(lastActive: 3)), Action.none),
        // The stall of answers counts from the peer's last progress.
        ([.blocked(progress: false, at: 1), .blocked(progress: true, at: 5)], open(.betweenLines, .none(lastActive: 5), .blocked(since: 5)), nil),
        ([.blocked(progress: false, at: 1), .blocked(progress: false, at: 5)], open(.betweenLines, .none(lastActive: 0), .blocked(since: 1)), nil),
        ([.owed(true, at: 1), .blocked(progress: false, at: 2), .owed(false, at: 3)], open(.betweenLines, .none(lastActive: 3), .blocked(since: 2)), nil),
        // Half-closed while blocked: closes once the answers are out, after what waits is read.
        ([.blocked(progress: false, at: 1), .peerDone], open(.betweenLines, .none(lastActive: 0), .blocked(since: 1), .done), nil),
        ([.blocked(progress: false, at: 1), .peerDone, .drained(at: 2)], open(.betweenLines, .none(lastActive: 2), .drained, .done), .close(.peerFinished)),
        ([.blocked(progress: false, at: 1), .input, .peerDone, .drained(at: 2)], open(.betweenLines, .none(lastActive: 2), .drained, .done), .read),
        // The peer's end of input ends a started line: the framing takes it as the last one.
        ([.part(at: 1), .peerDone], open(.betweenLines, .none(lastActive: 1), .drained, .done), nil),
        ([.part(at: 1), .held(true, at: 2), .peerDone], open(.held(midLine: false), .none(lastActive: 1), .drained, .done), nil),
        ([.owed(true, at: 0), .part(at: 1), .input, .peerDone], open(.waiting(midLine: false), .answering, .drained, .done), nil),
        // The last answer: the connection closes once it is out, whatever waits.
        ([.lastAnswer], open(.betweenLines, .none(lastActive: 0), .lastAnswer), nil),
        ([.lastAnswer, .drained(at: 1)], open(.betweenLines, .none(lastActive: 1), .lastAnswer), .close(.lastAnswerSent)),
        ([.lastAnswer, .blocked(progress: false, at: 1)], open(.betweenLines, .none(lastActive: 0), .lastAnswerBlocked(since: 1)), nil),
        ([.blocked(progress: false, at: 1), .lastAnswer], open(.betweenLines, .none(lastActive: 0), .lastAnswerBlocked(since: 1)), nil),
        ([.lastAnswer, .blocked(progress: false, at: 1), .blocked(progress: true, at: 4)], open(.betweenLines, .none(lastActive: 4), .lastAnswerBlocked(since: 4)), nil),
        ([.blocked(progress: false, at: 1), .input, .lastAnswer, .peerDone, .drained(at: 2)],
         open(.waiting(midLine: false), .none(lastActive: 2), .lastAnswer, .done), .close(.lastAnswerSent)),
        // The ends carry nothing, and nothing moves them on.
        ([.blocked(progress: false, at: 1), .owed(true, at: 1), .peerDone, .closed], .closed, nil),
        ([.part(at: 1), .handedOver], .handedOver, nil),
        ([.closed, .input], .closed, Action.none),
        ([.closed, .part(at: 1), .held(true, at: 2), .owed(true, at: 3), .blocked(progress: false, at: 4), .lastAnswer, .peerDone, .wrote(at: 5)], .closed, nil),
        ([.handedOver, .drained(at: 9)], .handedOver, Action.none),
    ]

    @Test(arguments: transitions)
    func eachEventMovesTheConnectionOnAsItsRulesSay(steps: [Step], state: State, action: Action?) {
        let (life, last) = Self.run(steps)
        #expect(life.state == state)
        #expect(last == action)
    }

    // MARK: States

    static let phases: [([Step], Life.Phase)] = [
        ([], .idle),
        ([.lastAnswer], .idle),
        ([.part(at: 1)], .reading),
        ([.held(true, at: 0), .part(at: 1)], .reading),
        ([.owed(true, at: 0), .input], .answering),
        ([.owed(true, at: 0), .part(at: 1)], .answering),
        ([.blocked(progress: false, at: 1)], .waitingToWrite),
        ([.owed(true, at: 0), .blocked(progress: false, at: 1)], .waitingToWrite),
        ([.lastAnswer, .blocked(progress: false, at: 1)], .waitingToWrite),
        ([.peerDone], .halfClosed),
        ([.peerDone, .part(at: 1)], .reading),
        ([.peerDone, .blocked(progress: false, at: 1)], .waitingToWrite),
        ([.closed], .closed),
        ([.handedOver], .handedOver),
    ]

    @Test(arguments: phases)
    func everyStateHasTheNameOfTheFirstRuleThatApplies(steps: [Step], phase: Life.Phase) {
        #expect(Self.run(steps).0.phase == phase)
    }

    // MARK: Timeouts

    static let timeouts: [([Step], UInt64?, UInt64, Action)] = [
        ([], 60, 59, .none),
        ([], 60, 60, .close(.idle)),
        ([.line(at: 50)], 110, 109, .none),
        ([.wrote(at: 50)], 110, 110, .close(.idle)),
        ([.part(at: 1)], 11, 10, .none),
        ([.part(at: 1), .part(at: 5)], 11, 11, .close(.lineUnfinished)),
        ([.part(at: 1), .peerDone], 61, 11, .none),
        // Held: only the idle rule applies; resumed, the stall counts from then.
        ([.part(at: 1), .held(true, at: 2)], 61, 61, .close(.idle)),
        ([.part(at: 1), .held(true, at: 2), .held(false, at: 30)], 40, 39, .none),
        ([.part(at: 1), .held(true, at: 2), .held(false, at: 30)], 40, 40, .close(.lineUnfinished)),
        // Answers in the works: never idle, but a started line still stalls.
        ([.owed(true, at: 1)], nil, 3600, .none),
        ([.owed(true, at: 1), .input], nil, 3600, .none),
        ([.owed(true, at: 1), .part(at: 2)], 12, 12, .close(.lineUnfinished)),
        ([.owed(true, at: 1), .owed(false, at: 3600)], 3660, 3660, .close(.idle)),
        // Answers the peer does not take: only the stall of the answers applies.
        ([.blocked(progress: false, at: 1)], 11, 10, .none),
        ([.blocked(progress: false, at: 1)], 11, 11, .close(.notReading)),
        ([.blocked(progress: false, at: 1), .blocked(progress: true, at: 5)], 15, 15, .close(.notReading)),
        ([.part(at: 1), .blocked(progress: false, at: 5)], 15, 11, .none),
        ([.owed(true, at: 0), .blocked(progress: false, at: 5)], 15, 15, .close(.notReading)),
        ([.lastAnswer, .blocked(progress: false, at: 1)], 11, 11, .close(.notReading)),
        ([.blocked(progress: false, at: 1), .drained(at: 5)], 65, 64, .none),
        ([.closed], nil, 1000, .none),
        ([.handedOver], nil, 1000, .none),
    ]

    @Test(arguments: timeouts)
    func eachTimeoutClosesOnlyWhatItTimes(steps: [Step], deadline: UInt64?, now: UInt64, action: Action) {
        let (life, _) = Self.run(steps)
        #expect(life.nextDeadline == deadline)
        #expect(life.timeReached(now) == action)
    }

    // MARK: The peer's half-close

    static let halfCloses: [([Step], Action, Bool)] = [
        ([], .none, false),
        ([.peerDone], .close(.peerFinished), false),
        ([.peerDone, .owed(true, at: 0)], .none, true),
        ([.owed(true, at: 0), .peerDone, .owed(false, at: 1)], .close(.peerFinished), false),
        ([.peerDone, .part(at: 0)], .none, true),
        ([.peerDone, .part(at: 0), .line(at: 1)], .close(.peerFinished), false),
        ([.part(at: 0), .peerDone], .close(.peerFinished), false),
        ([.part(at: 0), .held(true, at: 1), .peerDone], .none, true),
        ([.peerDone, .held(true, at: 0)], .none, true),
        ([.peerDone, .held(true, at: 0), .held(false, at: 1)], .close(.peerFinished), false),
        ([.peerDone, .blocked(progress: false, at: 0)], .none, true),
        ([.blocked(progress: false, at: 0), .input, .peerDone], .none, true),
        ([.peerDone, .closed], .none, false),
        ([.peerDone, .handedOver], .none, false),
    ]

    @Test(arguments: halfCloses)
    func aHalfClosedPeerIsClosedOnceNothingIsOwedToIt(steps: [Step], settled: Action, keepsOpen: Bool) {
        let (life, _) = Self.run(steps)
        #expect(life.settled() == settled)
        #expect(life.keepsOpenAfterPeerDone == keepsOpen)
    }

    /// The front door reports three events a request: they copy a few words of plain value
    /// and never count references or allocate.
    @Test func theLifecycleIsAPlainValue() {
        #expect(_isPOD(ConnectionLifecycle.self))
    }
}
