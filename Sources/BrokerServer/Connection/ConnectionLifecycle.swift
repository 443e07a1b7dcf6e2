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
/// States (`state`), of which one holds at a time, the first that applies:
/// - `handedOver`, `closed`: the connection is no longer this holder's;
/// - `waitingToWrite`: the peer has not taken all its answers (the socket's buffer is
///   full); nothing more is read until it has (back-pressure), and it is closed when it
///   takes nothing for the stall timeout;
/// - `answering`: answers are being worked on (a refresh, a sign-in); never idle;
/// - `reading`: a request line is started and not finished; closed when it is not
///   finished within the stall timeout, not counting the time reads are held back;
/// - `halfClosed`: the peer closed its writing side; the connection closes once nothing
///   is owed to it;
/// - `idle`: between requests; closed after the idle timeout.
struct ConnectionLifecycle: Sendable {
    enum State: Equatable, Sendable {
        case idle, reading, answering, waitingToWrite, halfClosed, closed, handedOver
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
    /// When the connection last read or wrote.
    private(set) var lastActive: UInt64
    /// When the request line not yet finished started (or when reads resumed, if they were
    /// held meanwhile: the rest of the line may have waited in the socket, unread by us).
    private(set) var lineStarted: UInt64?
    /// When the peer last took any of its answers, while some wait for it.
    private(set) var blockedSince: UInt64?
    /// The holder stopped reading (back-pressure, or as many requests in flight as allowed).
    private(set) var readsHeld = false
    /// Answers are being worked on.
    private(set) var answersOwed = false
    /// Input came while answers waited: read it once they are out.
    private(set) var inputWaiting = false
    /// The peer closed its writing side.
    private(set) var peerDone = false
    /// Close once the answers waiting are out.
    private(set) var closeWhenSent = false
    private var ended: State?

    init(limits: ConnectionLimits, now: UInt64) {
        self.limits = limits
        self.lastActive = now
    }

    var state: State {
        if let ended { return ended }
        if blockedSince != nil { return .waitingToWrite }
        if answersOwed { return .answering }
        if lineStarted != nil { return .reading }
        if peerDone { return .halfClosed }
        return .idle
    }

    /// Whether the peer's end of input must leave the connection open (NIO's half-closure):
    /// only while it is still owed something, so that otherwise its hang-up closes at once.
    var keepsOpenAfterPeerDone: Bool {
        lineStarted != nil || readsHeld || answersOwed || blockedSince != nil
    }

    /// When `timeReached` may next have something to do; nil: nothing times out.
    var nextDeadline: UInt64? {
        if ended != nil { return nil }
        if let blockedSince { return blockedSince &+ limits.stallTimeout }
        var due: UInt64? = answersOwed ? nil : lastActive &+ limits.idleTimeout
        if let lineStarted, !readsHeld {
            let stall = lineStarted &+ limits.stallTimeout
            due = min(due ?? stall, stall)
        }
        return due
    }

    // MARK: Events

    /// Input is signalled (the front door's event: it takes one request at a time). Read
    /// it, unless answers wait for the peer or one is being worked on: then it waits until
    /// they are out (`writeDrained`).
    mutating func inputArrived() -> Action {
        guard ended == nil else { return .none }
        if blockedSince != nil || answersOwed {
            inputWaiting = true
            return .none
        }
        return .read
    }

    /// A chunk was read. A chunk ending in a newline finishes every line in it; one with a
    /// newline inside starts a new line; one without starts a line unless one is started.
    mutating func chunkRead(endsLine: Bool, hasNewline: Bool, now: UInt64) {
        lastActive = now
        if endsLine {
            lineStarted = nil
        } else if hasNewline || lineStarted == nil {
            lineStarted = now
        }
    }

    /// An answer was handed to the socket.
    mutating func wrote(now: UInt64) {
        lastActive = now
    }

    /// The peer closed its writing side (its end of input was read or signalled).
    mutating func peerClosedWriting() {
        peerDone = true
    }

    /// The holder stops (true) or resumes (false) reading. While held, the stall of a
    /// started line is not counted: it counts afresh once reads resume.
    mutating func readsHeld(_ held: Bool, now: UInt64) {
        if readsHeld && !held && lineStarted != nil { lineStarted = now }
        readsHeld = held
    }

    /// Answers start (true) or stop (false) being worked on.
    mutating func answersOwed(_ owed: Bool, now: UInt64) {
        if answersOwed && !owed { lastActive = now }
        answersOwed = owed
    }

    /// The answer about to be written is the last: close once it is out.
    mutating func closeAfterAnswer() {
        closeWhenSent = true
    }

    /// The socket did not take all of an answer; `progress`: it took some of it now.
    mutating func writeBlocked(progress: Bool, now: UInt64) {
        if progress || blockedSince == nil { blockedSince = now }
        if progress { lastActive = now }
    }

    /// Every answer written is out.
    mutating func writeDrained(now: UInt64) -> Action {
        guard ended == nil else { return .none }
        blockedSince = nil
        lastActive = now
        if closeWhenSent { return .close(.lastAnswerSent) }
        if inputWaiting {
            inputWaiting = false
            return .read
        }
        return peerDone ? .close(.peerFinished) : .none
    }

    /// The events of one wake-up are handled: closes a connection whose peer is done once
    /// nothing is owed to it.
    func settled() -> Action {
        guard ended == nil else { return .none }
        let owing = ConnectionRules.Owing(answers: answersOwed, input: lineStarted != nil || readsHeld || inputWaiting,
                                          unsent: blockedSince != nil)
        return ConnectionRules.closesOncePeerDone(peerDone, owing: owing) ? .close(.peerFinished) : .none
    }

    /// Time passed (a timer fired, a sweep): closes what waited too long. A connection with
    /// answers in the works is never idle (a sign-in may wait for the user for minutes).
    func timeReached(_ now: UInt64) -> Action {
        guard ended == nil else { return .none }
        if let blockedSince {
            return now &- blockedSince >= limits.stallTimeout ? .close(.notReading) : .none
        }
        if let lineStarted, !readsHeld, now &- lineStarted >= limits.stallTimeout { return .close(.lineUnfinished) }
        if !answersOwed, now &- lastActive >= limits.idleTimeout { return .close(.idle) }
        return .none
    }

    /// The connection was closed.
    mutating func closed() {
        ended = .closed
    }

    /// The connection went to another holder (the front door's to NIO).
    mutating func handedOver() {
        ended = .handedOver
    }
}
