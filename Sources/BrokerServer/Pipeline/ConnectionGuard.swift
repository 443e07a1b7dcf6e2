import BrokerProtocol
import NIOCore

/// Sent up the pipeline when a connection had no traffic for the idle timeout.
struct ConnectionIdle: Sendable {}

/// Sent down the pipeline by the RPC handler when it stops (true) or resumes (false)
/// reading a connection's requests.
struct ReadsHeld: Sendable {
    let held: Bool
}

/// Sent down the pipeline by the RPC handler when it starts (true) or stops (false) owing
/// answers that are still being worked on.
struct AnswersOwed: Sendable {
    let owed: Bool
}

/// Sent down the pipeline by the RPC handler, once its peer closed its writing side, when
/// what it owes may have come to an end: the guard closes the connection if its lifecycle
/// says nothing is owed any more (`ConnectionLifecycle.settled`), as the front door does.
struct SettleAfterPeerDone: Sendable {}

/// Sent up the pipeline when a connection's answers stayed unread (the channel not
/// writable) for the stall timeout: the peer does not read, and the connection is closed.
struct ConnectionNotReading: Sendable {}

/// NIO's holder of a connection's lifecycle (`ConnectionLifecycle`, which has the rules),
/// before any framing: it reports the pipeline's events to it (chunks read, answers
/// written, the channel's writability, the RPC handler's held reads and owed answers),
/// keeps one timer at the lifecycle's next deadline, and carries out what the lifecycle
/// says when it fires: a request line not finished within the stall timeout closes the
/// connection with an error; answers not read for the stall timeout (the write buffer above
/// its high-water mark, the RPC handler no longer reading) close it through the RPC
/// handler (`ConnectionNotReading`); nothing to do for the idle timeout is told to the RPC
/// handler (`ConnectionIdle`), which closes unless the connection waits for events.
///
/// The close once the peer is done is the lifecycle's too: the guard tells it of the peer's
/// end of input, and the RPC handler asks (`SettleAfterPeerDone`) when what it owed may
/// have come to an end; the lifecycle knows all that is owed, answers not yet taken included.
///
/// The guard also switches the connection's half-closure on only while the lifecycle says
/// the peer is still owed something: a started line, a held line, an answer being worked
/// on, answers queued past the high-water mark. Otherwise the peer's end of stream closes
/// the connection at once in NIO, without the half-close events and the extra close
/// through the pipeline (docs/performance.md, "What the hot path does").
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var life: ConnectionLifecycle
    /// The one timer, at `armedAt` (uptime ns; `.max`: none). It is not moved later on each
    /// request (scheduling and cancelling a task cost a fifth of a cache hit in a profile):
    /// when it fires early the lifecycle says so and it sleeps for the rest.
    private var timer: Scheduled<Void>?
    private var armedAt = UInt64.max
    /// Whether the connection's half-closure is on now (NIO's default: off).
    private var halfClosure = false
    /// The connection's codec, shared with its RPC handler: the guard's answers are encoded
    /// as every other answer of the connection, with no encoder of its own.
    private let codec: RPCCodec

    /// - Parameters:
    ///   - limits: the connection's timeouts: how long a started request line may take to
    ///     finish and answers may wait unread (`stallTimeout`), how long it may stay open
    ///     with nothing to do (`idleTimeout`).
    ///   - codec: the connection's codec (the RPC handler's).
    init(limits: ConnectionLimits, codec: RPCCodec) {
        self.codec = codec
        life = ConnectionLifecycle(limits: limits, now: 0)
    }

    /// The event loop's clock: the one its timers run by (virtual on an `EmbeddedEventLoop`).
    private func now(_ context: ChannelHandlerContext) -> UInt64 { context.eventLoop.now.uptimeNanoseconds }

    func channelActive(context: ChannelHandlerContext) {
        life.wrote(now: now(context))
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        life.closed()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            _ = life.writeDrained(now: now(context))
        } else {
            life.writeBlocked(progress: false, now: now(context))
            allowHalfClosure(context)
            arm(context)
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data).readableBytesView
        if !bytes.isEmpty {
            let newline = UInt8(ascii: "\n")
            let ends = bytes.last == newline
            life.chunkRead(endsLine: ends, hasNewline: ends || bytes.contains(newline), now: now(context))
            arm(context)
        }
        context.fireChannelRead(data)
        // After the lines of this chunk were handled: the end of stream may be read next.
        allowHalfClosure(context)
    }

    /// Half-closure on while the lifecycle says the peer is owed something: it may have
    /// closed its writing side and still read. Off otherwise, so that a peer's end of
    /// stream closes the connection at once.
    private func allowHalfClosure(_ context: ChannelHandlerContext) {
        let needed = life.keepsOpenAfterPeerDone
        guard needed != halfClosure, context.channel.isActive else { return }
        halfClosure = needed
        try? context.channel.syncOptions?.setOption(.allowRemoteHalfClosure, value: needed)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { life.peerClosedWriting() }
        context.fireUserInboundEventTriggered(event)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let held = event as? ReadsHeld {
            life.readsHeld(held.held, now: now(context))
        } else if let owed = event as? AnswersOwed {
            life.answersOwed(owed.owed, now: now(context))
        } else if event is SettleAfterPeerDone {
            promise?.succeed(())
            if case .close(.peerFinished) = life.settled(), context.channel.isActive { context.close(promise: nil) }
            return
        } else {
            return context.triggerUserOutboundEvent(event, promise: promise)
        }
        allowHalfClosure(context)
        arm(context)
        promise?.succeed(())
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        life.wrote(now: now(context))
        arm(context)
        context.write(data, promise: promise)
    }

    /// Sets the timer to the lifecycle's next deadline when that is earlier than the one set.
    private func arm(_ context: ChannelHandlerContext) {
        guard let due = life.nextDeadline, due < armedAt else { return }
        timer?.cancel()
        armedAt = due
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: .uptimeNanoseconds(due)) {
            let (guardian, context) = bound.value
            guardian.timeReached(context)
        }
    }

    /// The timer fired: does what the lifecycle says about the time now, then sets the timer
    /// to its next deadline.
    private func timeReached(_ context: ChannelHandlerContext) {
        timer = nil
        armedAt = .max
        switch life.timeReached(now(context)) {
        case .close(.lineUnfinished):
            let seconds = life.limits.stallTimeout / 1_000_000_000
            context.writeAnswer(codec.failure(.null, RPCError(.invalidRequest, "the request line was not finished within \(seconds) s; the connection is closed")),
                                then: .close)
        case .close(.notReading):
            context.fireUserInboundEventTriggered(ConnectionNotReading())
        case .close(.idle):
            // The RPC handler decides (a subscriber waits for events however long none
            // comes); the timer is set again on the connection's next activity.
            context.fireUserInboundEventTriggered(ConnectionIdle())
        case .none, .read, .close:
            arm(context)
        }
    }

}
