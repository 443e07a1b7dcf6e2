import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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

/// Sent up the pipeline when a connection's answers stayed unread (the channel not
/// writable) for the stall timeout: the peer does not read, and the connection is closed.
struct ConnectionNotReading: Sendable {}

/// Limits for one connection, before any framing: a request line that is started but not
/// finished within `stallTimeout` closes the connection (a client that sends half a line and
/// stalls holds no buffer for long), and so does a connection with nothing to do for
/// `idleTimeout`. A connection whose answers are not read (its write buffer stays above the
/// high-water mark) for `stallTimeout` is closed too: the RPC handler has stopped reading
/// from it, and it would otherwise hold its buffers until the idle timeout.
///
/// The guard also switches the connection's half-closure on only while the peer is still
/// owed something: a started line, a held line, an answer being worked on, answers queued
/// past the high-water mark. Otherwise the peer's end of stream closes the connection at
/// once in NIO, without the half-close events and the extra close through the pipeline
/// (docs/performance.md, "The request path").
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let stallTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var stallTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    private var drainTimer: Scheduled<Void>?
    /// The RPC handler holds reads back (`ReadsHeld`): the rest of a started line may be
    /// waiting in the socket, unread by the daemon, so the stall timer does not count.
    private var readsHeld = false
    /// The RPC handler works on answers for this connection (`AnswersOwed`).
    private var answersOwed = false
    /// Whether the connection's half-closure is on now (NIO's default: off).
    private var halfClosure = false
    /// When the connection last read or wrote. The idle timer is not re-armed on each
    /// request (scheduling and cancelling a task cost a fifth of a cache hit in a profile):
    /// when it fires early it looks here and sleeps for the rest.
    private var lastActive = NIODeadline.now()

    /// - Parameters:
    ///   - stallTimeout: how long a started request line may take to finish, and how long
    ///     answers may wait unread (`[daemon] request_line_timeout`).
    ///   - idleTimeout: how long a connection may stay open with nothing to do
    ///     (`[daemon] connection_idle_timeout`).
    init(stallTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.stallTimeout = stallTimeout
        self.idleTimeout = idleTimeout
    }

    func channelActive(context: ChannelHandlerContext) {
        armIdle(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stallTimer?.cancel()
        idleTimer?.cancel()
        drainTimer?.cancel()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            drainTimer?.cancel()
            drainTimer = nil
        } else if drainTimer == nil {
            allowHalfClosure(context)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            drainTimer = context.eventLoop.scheduleTask(in: stallTimeout) {
                bound.value.fireUserInboundEventTriggered(ConnectionNotReading())
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // The timer runs from the start of the line not yet finished: a chunk ending in a
        // newline finishes every line; one with a newline inside starts a new line.
        let bytes = buffer.readableBytesView
        if bytes.last == UInt8(ascii: "\n") {
            stallTimer?.cancel()
            stallTimer = nil
        } else if bytes.contains(UInt8(ascii: "\n")) {
            stallTimer?.cancel()
            armStall(context)
        } else if stallTimer == nil, !bytes.isEmpty {
            armStall(context)
        }
        armIdle(context)
        context.fireChannelRead(data)
        // After the lines of this chunk were handled: the end of stream may be read next.
        allowHalfClosure(context)
    }

    /// Half-closure on while the peer is owed an answer or a started line waits for its
    /// end: the peer may have closed its writing side and still read. Off otherwise, so that
    /// a peer's end of stream closes the connection at once.
    private func allowHalfClosure(_ context: ChannelHandlerContext) {
        let needed = stallTimer != nil || readsHeld || answersOwed || !context.channel.isWritable
        guard needed != halfClosure, context.channel.isActive else { return }
        halfClosure = needed
        try? context.channel.syncOptions?.setOption(.allowRemoteHalfClosure, value: needed)
    }

    private func armStall(_ context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        stallTimer = context.eventLoop.scheduleTask(in: stallTimeout) { [stallTimeout] in
            let (guardian, context) = bound.value
            // The rest of the line may be waiting in the socket because the daemon stopped
            // reading (back-pressure): that is not the client's stall, so wait again.
            guard !guardian.readsHeld else { return guardian.armStall(context) }
            let seconds = stallTimeout.nanoseconds / 1_000_000_000
            Self.closeWith(context, RPCError(.invalidRequest, "the request line was not finished within \(seconds) s; the connection is closed"))
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if let held = event as? ReadsHeld {
            readsHeld = held.held
        } else if let owed = event as? AnswersOwed {
            answersOwed = owed.owed
        } else {
            return context.triggerUserOutboundEvent(event, promise: promise)
        }
        allowHalfClosure(context)
        promise?.succeed(())
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        armIdle(context)
        context.write(data, promise: promise)
    }

    private func armIdle(_ context: ChannelHandlerContext) {
        lastActive = .now()
        if idleTimer == nil { scheduleIdle(context, at: lastActive + idleTimeout) }
    }

    private func scheduleIdle(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (guardian, context) = bound.value
            let due = guardian.lastActive + guardian.idleTimeout
            if due > .now() {
                guardian.scheduleIdle(context, at: due)
                return
            }
            guardian.idleTimer = nil
            // The RPC handler decides: it closes unless an answer is still being worked on
            // (a sign-in may wait for the user for many minutes).
            context.fireUserInboundEventTriggered(ConnectionIdle())
        }
    }

    /// Writes one error answer (id null) and closes.
    static func closeWith(_ context: ChannelHandlerContext, _ error: RPCError) {
        let data = (try? JSONEncoder().encode(ErrorResponse(id: .null, error: error))) ?? Data()
        context.writeAnswer(data, then: .close)
    }
}
