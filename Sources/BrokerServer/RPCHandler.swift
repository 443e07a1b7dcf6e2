import BrokerCore
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore

/// Who is on the other end of a new connection, or nil when that cannot be known.
typealias PeerIdentifier = @Sendable (any Channel) -> Caller?

/// Turns each line into a JSON-RPC call and writes its answer. Answers go out in the order
/// they are ready, matched by `id`; the connection stays open after any error in a request.
final class RPCHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let table: MethodTable
    private let counters: BrokerCounters
    private let logger: Logger
    private let activity: ServerActivity
    private let codec = RPCCodec()
    private let maxConnections: Int
    /// Reads who is on the other end of a new connection.
    private let identify: PeerIdentifier
    /// The peer, read once when the connection opens (SO_PEERCRED, /proc).
    private var caller: Caller?
    private var refused = false
    /// Async answers not yet written; a half-closed connection closes when this reaches 0.
    private var pending = 0
    private var inputClosed = false
    /// Work cancelled when the connection closes (`Reply.untilClosed`), by a key per request.
    private var cancelledOnClose: [Int: Task<Void, Never>] = [:]
    private var nextWorkKey = 0

    /// - Parameter identify: the peer of a new connection; production reads the kernel's
    ///   word (`PeerCredentials.caller(of:)`). Tests on an `EmbeddedChannel`, which has no
    ///   peer, say who connects; the check of the uid stays the same.
    init(table: MethodTable, counters: BrokerCounters, logger: Logger, activity: ServerActivity, maxConnections: Int,
         identify: @escaping PeerIdentifier = PeerCredentials.caller(of:)) {
        self.identify = identify
        self.table = table
        self.counters = counters
        self.logger = logger
        self.activity = activity
        self.maxConnections = maxConnections
    }

    func channelActive(context: ChannelHandlerContext) {
        activity.opened()
        caller = identify(context.channel)
        let me = getuid()
        if caller?.uid != me {
            // Even with the socket's mode loosened, only the daemon's own user is served.
            refuse(context, RPCError(.forbidden, "connections from uid \(caller.map { String($0.uid) } ?? "unknown") are refused: authbrokerd serves only its own user (uid \(me))"))
            logger.warning("refused a connection from another user", metadata: ["uid": "\(caller.map { String($0.uid) } ?? "unknown")", "pid": "\(caller.map { String($0.pid) } ?? "unknown")"])
        } else if activity.openConnections > maxConnections {
            refuse(context, RPCError(.overloaded, "authbrokerd has \(maxConnections) connections open already; close some and try again", data: ErrorData(limit: maxConnections)))
            logger.warning("connection limit reached", metadata: ["limit": "\(maxConnections)"])
        }
        context.fireChannelActive()
    }

    /// Answers the refusal, then closes the writing side only: closing outright with the
    /// peer's request unread would reset the connection and lose the answer. What the peer
    /// still sends is discarded; the connection closes when it hangs up (or after 5 s).
    private func refuse(_ context: ChannelHandlerContext, _ error: RPCError) {
        refused = true
        counters.errors.increment()
        let data = codec.failure(.null, error)
        var out = context.channel.allocator.buffer(capacity: data.count + 1)
        out.writeBytes(data)
        out.writeInteger(UInt8(ascii: "\n"))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in
            channel.close(mode: .output, promise: nil)
            channel.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        activity.closed()
        // A peer that hung up fully (not a half-close: that one still reads its answers).
        for task in cancelledOnClose.values { task.cancel() }
        cancelledOnClose = [:]
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // Blank lines between requests are tolerated, as many line protocols do.
        if refused || buffer.readableBytesView.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        counters.requests.increment()
        activity.touch()
        // One pass over the bytes for the requests clients send; JSONDecoder for the rest.
        let scanned = buffer.withUnsafeReadableBytes { ScannedRequest.scan($0) }
        let line = RequestLine(scanned: scanned, bytes: buffer)
        let header: (jsonrpc: String?, id: RequestID?, method: String?, hasID: Bool)
        if let scanned {
            header = (scanned.jsonrpc, scanned.id, scanned.method, scanned.hasID)
        } else {
            do {
                let h = try codec.decoder.decode(RequestHeader.self, from: line.data)
                header = (h.jsonrpc, h.id, h.method, h.hasID)
            } catch {
                return fail(context, .null, Self.classify(error))
            }
        }
        let id = header.id ?? .null
        guard header.jsonrpc == "2.0" else {
            return fail(context, id, RPCError(.invalidRequest, "the request must have \"jsonrpc\": \"2.0\""))
        }
        guard let method = header.method else {
            return fail(context, id, RPCError(.invalidRequest, "the request has no \"method\" string"))
        }
        guard let handler = table[method] else {
            return fail(context, id, RPCError(.methodNotFound, "there is no method \"\(method.prefix(64))\": see docs/protocol.md for the methods"))
        }
        let reply = handler(line, id, codec, caller)
        // A notification (no id) is carried out but never answered (JSON-RPC 2.0 §4.1).
        let answer = header.hasID
        switch reply {
        case .now(let data):
            if answer { write(context, data) }
        case .later(let work), .untilClosed(let work):
            pending += 1
            let activity = self.activity
            activity.started()
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let key = nextWorkKey
            nextWorkKey += 1
            let task = Task {
                let data = await work()
                activity.finished()
                loop.execute {
                    let (handler, context) = bound.value
                    handler.cancelledOnClose[key] = nil
                    handler.pending -= 1
                    if answer { handler.write(context, data) }
                    handler.closeIfDone(context)
                }
            }
            if case .untilClosed = reply { cancelledOnClose[key] = task }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            inputClosed = true
            if refused { return context.close(promise: nil) }
            closeIfDone(context)
        } else if event is ConnectionIdle {
            // Idle, unless an answer is still being worked on (a sign-in waits for the user).
            if pending == 0 { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let e = error as? LineFrameDecoder.LineTooLong {
            counters.errors.increment()
            logger.notice("request line over the size cap; closing the connection", metadata: ["limit": "\(e.limit)"])
            let data = codec.failure(.null, RPCError(.requestTooLarge, "the request line is longer than \(e.limit) bytes; the connection is closed", data: ErrorData(limit: e.limit)))
            var out = context.channel.allocator.buffer(capacity: data.count + 1)
            out.writeBytes(data)
            out.writeInteger(UInt8(ascii: "\n"))
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func closeIfDone(_ context: ChannelHandlerContext) {
        if inputClosed && pending == 0 && context.channel.isActive { context.close(promise: nil) }
    }

    private func fail(_ context: ChannelHandlerContext, _ id: RequestID, _ error: RPCError) {
        counters.errors.increment()
        write(context, codec.failure(id, error))
    }

    private func write(_ context: ChannelHandlerContext, _ data: Data) {
        guard context.channel.isActive else { return }
        var out = context.channel.allocator.buffer(capacity: data.count + 1)
        out.writeBytes(data)
        out.writeInteger(UInt8(ascii: "\n"))
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    /// Parse error for text that is not JSON; invalid request for JSON that is not a
    /// request object (JSON-RPC 2.0 §5.1).
    static func classify(_ error: any Error) -> RPCError {
        if case DecodingError.dataCorrupted(let ctx) = error, ctx.codingPath.isEmpty {
            return RPCError(.parseError, "the request is not valid JSON")
        }
        if case DecodingError.typeMismatch(_, let ctx) = error, ctx.codingPath.isEmpty {
            return RPCError(.invalidRequest, "the request must be a JSON object (batches are not supported)")
        }
        return RPCError(.invalidRequest, "the request is not a valid JSON-RPC 2.0 request: \(MethodTable.describe(error))")
    }
}
