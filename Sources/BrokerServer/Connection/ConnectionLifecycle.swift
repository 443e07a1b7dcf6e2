/// The life of one connection, as one value: every state it can be in and the rules that
/// move it on. The idle, stall and back-pressure rules are written here once; the two
/// places that hold connections only report events to it and carry out the action it
/// returns (the model is async-http-client's `HTTP1ConnectionStateMachine`):
/// - the front door (`FrontDoor`), the fast path, which reads whole request lines from
///   the socket itself and writes their answers;
/// - NIO's pipeline (`ConnectionGuard`), for every connection the front door hands over.
///
/// It reads no clock and touches no socket: each event carries the time (monotonic
/// nanoseconds), so `ConnectionLifecycleTests` drive every transition without either.
///
/// The state (`State`) is an enum whose cases carry only what holds in them: an open
/// connection is four sides that move independently (what it reads, the work it owes,
/// what it writes, whether the peer still sends), each an enum whose every timestamp is
/// the one its case is timed by; a closed or handed-over connection carries nothing.
/// Every payload is a plain value (no reference, no existential), so an event copies a few
/// words and allocates nothing: the front door reports three events a request.
struct ConnectionLifecycle: Sendable {
    /// Where the connection is.
    enum State: Equatable, Sendable {
        /// This holder's, and open.
        case open(Open)
        /// Closed; nothing more happens to it.
        case closed
        /// Gone to another holder (the front door's to NIO); nothing more happens here.
        case handedOver
    }

    /// An open connection's four sides.
    struct Open: Equatable, Sendable {
        var input: Input
        var work: Work
        var output: Output
        var peer: Peer

        /// A new connection at `now`: nothing read, owed or written, and idle from `now`.
        static func fresh(_ now: UInt64) -> Open {
            Open(input: .betweenLines, work: .none(lastActive: now), output: .drained, peer: .sending)
        }
    }

    /// What the connection reads.
    enum Input: Equatable, Sendable {
        /// No request line started: between requests.
        case betweenLines
        /// A request line started at `since` (or when reads last resumed, if they were held
        /// meanwhile) and not finished: it must finish within the stall timeout.
        case line(since: UInt64)
        /// The holder stopped reading (back-pressure, or as many requests in flight as
        /// allowed; NIO's `ReadsHeld`); `midLine`: a line is started. The stall is not the
        /// peer's while reads are held: it counts afresh once they resume.
        case held(midLine: Bool)
        /// Input was signalled while answers were owed or unsent (the front door takes one
        /// request at a time): it is read once they are out (`writeDrained`). `midLine`: a
        /// line was started; as for held reads, its stall counts afresh once it is read.
        case waiting(midLine: Bool)
    }

    /// The work the connection owes.
    enum Work: Equatable, Sendable {
        /// No answer is being worked on: the idle timeout counts from `lastActive`, when the
        /// connection last read or wrote.
        case none(lastActive: UInt64)
        /// Answers are being worked on (a refresh, a sign-in, a subscription's events): the
        /// connection is never idle meanwhile.
        case answering
    }

    /// What the connection writes.
    enum Output: Equatable, Sendable {
        /// Every answer written is out.
        case drained
        /// The peer has not taken all its answers (the socket's buffer is full); it last
        /// took some at `since`. Nothing more is read until they are out (back-pressure),
        /// and the connection closes when the peer takes nothing for the stall timeout.
        case blocked(since: UInt64)
        /// The answer written next, or written already, is the last: the connection closes
        /// once it is out (a refusal).
        case lastAnswer
        /// The last answer is partly out; the peer last took some of it at `since`.
        case lastAnswerBlocked(since: UInt64)
    }

    /// Whether the peer still sends.
    enum Peer: Equatable, Sendable {
        case sending
        /// It closed its writing side (half-close): it is answered what it sent, then the
        /// connection closes.
        case done
    }

    /// The state in one word, the first that applies (for tests and logs).
    enum Phase: Equatable, Sendable {
        /// The connection is no longer this holder's.
        case closed, handedOver
        /// The peer has not taken all its answers.
        case waitingToWrite
        /// Answers are being worked on.
        case answering
        /// A request line is started and not finished.
        case reading
        /// The peer closed its writing side and nothing above applies.
        case halfClosed
        /// Between requests.
        case idle
    }

    /// Why the lifecycle says to close.
    enum CloseReason: Equatable, Sendable {
        /// Nothing to do for the idle timeout.
        case idle
        /// A request line started and not finished within the stall timeout.
        case lineUnfinished
        /// Answers the peer took none of for the stall timeout: it does not read.
        case notReading
        /// The peer closed its writing side and everything it sent is answered.
        case peerFinished
        /// The answer that was to be the last one is out (a refusal).
        case lastAnswerSent
    }

    /// What the holder of the connection does next.
    enum Action: Equatable, Sendable {
        /// Nothing now.
        case none
        /// Read the socket (input waits there).
        case read
        /// Close the connection.
        case close(CloseReason)
    }

    /// Its timeouts (`idleTimeout`, `stallTimeout`).
    let limits: ConnectionLimits
    /// Where the connection is; only the events move it on.
    private(set) var state: State

    init(limits: ConnectionLimits, now: UInt64) {
        self.limits = limits
        state = .open(.fresh(now))
    }

    /// The state in one word (`Phase`).
    var phase: Phase {
        guard case .open(let open) = state else { return state == .closed ? .closed : .handedOver }
        if open.output.unsentSince != nil { return .waitingToWrite }
        if open.work == .answering { return .answering }
        if open.input.midLine { return .reading }
        return open.peer == .done ? .halfClosed : .idle
    }

    /// Answers are being worked on.
    var answersOwed: Bool {
        guard case .open(let open) = state else { return false }
        return open.work == .answering
    }

    /// Whether the peer's end of input must leave the connection open (NIO's half-closure):
    /// only while it is still owed something, so that otherwise its hang-up closes at once.
    var keepsOpenAfterPeerDone: Bool {
        guard case .open(let open) = state else { return false }
        if case .held = open.input { return true }
        return open.input.midLine || open.work == .answering || open.output.unsentSince != nil
    }

    /// When `timeReached` may next have something to do; nil: nothing times out.
    var nextDeadline: UInt64? {
        guard case .open(let open) = state else { return nil }
        if let since = open.output.unsentSince { return since &+ limits.stallTimeout }
        var due: UInt64? = nil
        if case .none(let lastActive) = open.work { due = lastActive &+ limits.idleTimeout }
        if case .line(let since) = open.input {
            let stall = since &+ limits.stallTimeout
            due = min(due ?? stall, stall)
        }
        return due
    }
}

// MARK: Events

extension ConnectionLifecycle {
    /// Input is signalled (the front door's event: it takes one request at a time). Read
    /// it, unless answers wait for the peer or one is being worked on: then it waits until
    /// they are out (`writeDrained`). Reads the holder holds it resumes itself.
    mutating func inputArrived() -> Action {
        guard case .open(var open) = state else { return .none }
        guard open.work == .answering || open.output.unsentSince != nil else { return .read }
        switch open.input {
        case .betweenLines: open.input = .waiting(midLine: false)
        case .line: open.input = .waiting(midLine: true)
        case .held, .waiting: return .none
        }
        state = .open(open)
        return .none
    }

    /// A chunk was read. A chunk ending in a newline finishes every line in it; one with a
    /// newline inside starts a new line; one without starts a line unless one is started.
    mutating func chunkRead(endsLine: Bool, hasNewline: Bool, now: UInt64) {
        guard case .open(var open) = state else { return }
        open.work.active(now)
        switch open.input {
        case .betweenLines, .line:
            if endsLine {
                open.input = .betweenLines
            } else if hasNewline || open.input == .betweenLines {
                open.input = .line(since: now)
            }
        case .held: open.input = .held(midLine: !endsLine)
        case .waiting: open.input = .waiting(midLine: !endsLine)
        }
        state = .open(open)
    }

    /// An answer was handed to the socket.
    mutating func wrote(now: UInt64) {
        guard case .open(var open) = state else { return }
        open.work.active(now)
        state = .open(open)
    }

    /// The peer closed its writing side (its end of input was read or signalled). Nothing
    /// more of a started line comes: the framing takes what came as the last line, so the
    /// line is no longer the peer's to finish (NIO's; the front door starts none).
    mutating func peerClosedWriting() {
        guard case .open(var open) = state else { return }
        open.peer = .done
        switch open.input {
        case .line: open.input = .betweenLines
        case .held(true): open.input = .held(midLine: false)
        case .waiting(true): open.input = .waiting(midLine: false)
        case .betweenLines, .held(false), .waiting(false): break
        }
        state = .open(open)
    }

    /// The holder stops (true) or resumes (false) reading. While held, the stall of a
    /// started line is not counted: it counts afresh once reads resume.
    mutating func readsHeld(_ held: Bool, now: UInt64) {
        guard case .open(var open) = state else { return }
        switch (open.input, held) {
        case (.betweenLines, true), (.line, true), (.waiting, true): open.input = .held(midLine: open.input.midLine)
        case (.held(let midLine), false): open.input = midLine ? .line(since: now) : .betweenLines
        case (.held, true), (.betweenLines, false), (.line, false), (.waiting, false): return
        }
        state = .open(open)
    }

    /// Answers start (true) or stop (false) being worked on.
    mutating func answersOwed(_ owed: Bool, now: UInt64) {
        guard case .open(var open) = state else { return }
        switch (open.work, owed) {
        case (.none, true): open.work = .answering
        case (.answering, false): open.work = .none(lastActive: now)
        case (.none, false), (.answering, true): return
        }
        state = .open(open)
    }

    /// The answer about to be written is the last: close once it is out.
    mutating func closeAfterAnswer() {
        guard case .open(var open) = state else { return }
        switch open.output {
        case .drained: open.output = .lastAnswer
        case .blocked(let since): open.output = .lastAnswerBlocked(since: since)
        case .lastAnswer, .lastAnswerBlocked: return
        }
        state = .open(open)
    }

    /// The socket did not take all of an answer; `progress`: it took some of it now.
    mutating func writeBlocked(progress: Bool, now: UInt64) {
        guard case .open(var open) = state else { return }
        switch open.output {
        case .drained: open.output = .blocked(since: now)
        case .lastAnswer: open.output = .lastAnswerBlocked(since: now)
        case .blocked where progress: open.output = .blocked(since: now)
        case .lastAnswerBlocked where progress: open.output = .lastAnswerBlocked(since: now)
        case .blocked, .lastAnswerBlocked: break
        }
        if progress { open.work.active(now) }
        state = .open(open)
    }

    /// Every answer written is out.
    mutating func writeDrained(now: UInt64) -> Action {
        guard case .open(var open) = state else { return .none }
        defer { state = .open(open) }
        open.work.active(now)
        switch open.output {
        case .lastAnswer, .lastAnswerBlocked:
            open.output = .lastAnswer
            return .close(.lastAnswerSent)
        case .drained, .blocked:
            open.output = .drained
        }
        if case .waiting(let midLine) = open.input {
            open.input = midLine ? .line(since: now) : .betweenLines
            return .read
        }
        return open.peer == .done ? .close(.peerFinished) : .none
    }

    /// The events of one wake-up are handled: closes a connection whose peer is done once
    /// nothing is owed to it.
    func settled() -> Action {
        guard case .open(let open) = state else { return .none }
        let owing = ConnectionRules.Owing(answers: open.work == .answering, input: open.input != .betweenLines,
                                          unsent: open.output.unsentSince != nil)
        return ConnectionRules.closesOncePeerDone(open.peer == .done, owing: owing) ? .close(.peerFinished) : .none
    }

    /// Time passed (a timer fired, a sweep): closes what waited too long. A connection with
    /// answers in the works is never idle (a sign-in may wait for the user for minutes).
    func timeReached(_ now: UInt64) -> Action {
        guard case .open(let open) = state else { return .none }
        if let since = open.output.unsentSince {
            return now &- since >= limits.stallTimeout ? .close(.notReading) : .none
        }
        if case .line(let since) = open.input, now &- since >= limits.stallTimeout { return .close(.lineUnfinished) }
        if case .none(let lastActive) = open.work, now &- lastActive >= limits.idleTimeout { return .close(.idle) }
        return .none
    }

    /// The connection was closed.
    mutating func closed() {
        state = .closed
    }

    /// The connection went to another holder (the front door's to NIO).
    mutating func handedOver() {
        state = .handedOver
    }
}

extension ConnectionLifecycle.Input {
    /// A request line is started (read or not, held or not).
    var midLine: Bool {
        switch self {
        case .betweenLines: false
        case .line: true
        case .held(let midLine), .waiting(let midLine): midLine
        }
    }
}

extension ConnectionLifecycle.Work {
    /// The connection read or wrote at `now`: the idle time counts afresh (while answers
    /// are worked on it does not count at all).
    mutating func active(_ now: UInt64) {
        if case .none = self { self = .none(lastActive: now) }
    }
}

extension ConnectionLifecycle.Output {
    /// Since when answers wait unsent for the peer (the last time it took any); nil when
    /// none wait.
    var unsentSince: UInt64? {
        switch self {
        case .blocked(let since), .lastAnswerBlocked(let since): since
        case .drained, .lastAnswer: nil
        }
    }
}
