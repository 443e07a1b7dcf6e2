import NIOCore

/// One connection's back-pressure bookkeeping (`RPCHandler`): whether reading is held back,
/// the lines framed meanwhile, and what the connection guard was last told. A value kept
/// in the handler: nothing is allocated for it.
struct BackPressure {
    /// Lines framed while reading was paused, handled in order when it resumes.
    var held = CircularBuffer<ByteBuffer>()
    /// The channel asked for a read while paused; passed on when reading resumes.
    var readWanted = false
    /// Handling held lines now (a write inside may report writability again).
    var resuming = false
    /// Reads are held back now, as last told to the connection guard (`ReadsHeld`).
    var holding = false
    /// Answers are being worked on now, as last told to the connection guard (`AnswersOwed`).
    var owing = false

    /// Drops the held lines unhandled, wiped: any may be a login.answer whose value (a
    /// password) only handling it would have wiped, and they lie in the connection's read
    /// buffers, which are freed as they are (docs/security.md). Only a connection that
    /// closes with lines held pays for it.
    mutating func dropHeld() {
        while let line = held.popFirst() { line.wipeReadableBytes() }
    }
}
