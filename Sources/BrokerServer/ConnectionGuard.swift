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

/// Sent up the pipeline when a connection's answers stayed unread (the channel not
/// writable) for the stall timeout: the peer does not read, and the connection is closed.
struct ConnectionNotReading: Sendable {}

/// Limits for one connection, before any framing: a request line that is started but not
/// finished within `stallTimeout` closes the connection (a client that sends half a line and
/// stalls holds no buffer for long), and so does a connection with nothing to do for
/// `idleTimeout`. A connection whose answers are not read (its write buffer stays above the
/// high-water mark) for `stallTimeout` is closed too: the RPC handler has stopped reading
/// from it, and it would otherwise hold its buffers until the idle timeout.
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
        guard let held = event as? ReadsHeld else { return context.triggerUserOutboundEvent(event, promise: promise) }
        readsHeld = held.held
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
