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

/// The kernel's word on who opened a new connection (SO_PEERCRED), or nil when it cannot be known.
typealias PeerIdentifier = @Sendable (any Channel) -> PeerCredentials.UCred?

/// Turns each line into a JSON-RPC call and writes its answer. Answers go out in the order
/// they are ready, matched by `id`; the connection stays open after any error in a request.
///
/// Back-pressure: the handler stops reading from a connection while its answers are not
/// drained (the channel is not writable past the write-buffer high-water mark) or while
/// `maxInFlight` of its requests are being worked on. Lines already framed when reading
/// stopped wait in `BackPressure.held` (at most one socket read's worth) and are handled when it resumes.
final class RPCHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let table: MethodTable
    /// The server's rules for connections (caps, counting), and what its connections report
    /// to (`rules.server`: counters, activity, logger, events).
    let rules: ConnectionRules
    /// The connection's codec, shared with its `ConnectionGuard`.
    let codec: RPCCodec
    /// This connection's id at the events hub while it is subscribed.
    var subscription: Int?
    /// Who is on the other end and whether it is served.
    private(set) var caller: ConnectionCaller
    /// Whether reading is held back, and the lines framed meanwhile.
    private var pressure = BackPressure()
    /// The answers still being worked on.
    private var inFlight: InFlightWork

    /// - Parameter identify: the peer of a new connection; production reads the kernel's
    ///   word (`PeerCredentials.credentials(of:)`). Tests on an `EmbeddedChannel`, which has
    ///   no peer, say who connects; the check of the uid stays the same.
    init(table: MethodTable, limits: ConnectionLimits, server: ServerContext, handover: Handover = Handover(),
         identify: @escaping PeerIdentifier = PeerCredentials.credentials(of:), codec: RPCCodec = RPCCodec()) {
        self.codec = codec
        self.table = table
        self.rules = ConnectionRules(limits: limits, server: server)
        caller = ConnectionCaller(identify: identify, inspector: server.inspector, handover: handover)
        inFlight = InFlightWork(allowance: ConnectionAllowance(perMinute: table.cacheMissesPerMinute))
    }

    func channelActive(context: ChannelHandlerContext) {
        let peer = PeerIdentity(channel: context.channel, credentials: caller.identify(context.channel), inspector: caller.inspector)
        caller.peer = peer
        let me = PeerCredentials.daemonUID
        guard let cred = peer.credentials, cred.uid == me else {
            // Even with the socket's mode loosened, only the daemon's own user is served.
            // Another user's connection is closed at once and not counted, so it can
            // neither hold connection slots nor fill the log.
            let uid = peer.credentials.map { String($0.uid) } ?? "unknown"
            rules.server.refusals.refused(uid: uid, pid: peer.credentials.map { String($0.pid) } ?? "unknown", logger: rules.server.logger)
            caller.refused = true
            rules.server.counters.errors.increment()
            context.writeAnswer(codec.failure(.null, RPCError(.forbidden, "connections from uid \(uid) are refused: authbrokerd serves only its own user (uid \(me))")), then: .close)
            return
        }
        caller.counted = true
        rules.server.activity.opened()
        if let refusal = rules.refusal(connectingWith: rules.server.activity.openConnections - 1) {
            refuse(context, refusal)
        } else {
            let policy = table.callerPolicy()
            // Read who connected before it can run another program (docs/security.md); not
            // on a connection the front door accepted without rules: it is too late for that.
            if !policy.isOpen && !caller.handover.acceptedWithoutRules {
                peer.bind(descriptor: caller.handover.descriptor, needsCgroup: policy.needsCgroup, logger: rules.server.logger, counters: rules.server.counters, codec: codec)
            }
        }
        context.fireChannelActive()
        takeOver(context)
    }

    /// Goes on from where the front door stopped: the request it took in, then the bytes it
    /// read, before NIO reads the socket (which it does only after `channelActive`).
    private func takeOver(_ context: ChannelHandlerContext) {
        let handover = caller.handover
        caller.handover = Handover()
        if let adopted = handover.adopted, !caller.refused {
            startWork(context, adopted.reply, id: adopted.id, answer: adopted.answer, mints: adopted.mints)
            tellGuard(context)
        }
        if let unread = handover.unread, context.channel.isActive {
            context.pipeline.syncOperations.fireChannelRead(NIOAny(unread))
        }
    }

    /// Answers the refusal, then closes the writing side only (``AfterAnswer/closeOutput``).
    /// What the peer still sends is discarded; the connection closes when it hangs up (or
    /// after 5 s).
    private func refuse(_ context: ChannelHandlerContext, _ error: RPCError) {
        caller.refused = true
        rules.server.counters.errors.increment()
        context.writeAnswer(codec.failure(.null, error), then: .closeOutput)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if caller.counted { rules.server.activity.closed() }
        if let subscription { rules.server.events?.unsubscribe(subscription) }
        subscription = nil
        // A peer that hung up fully (not a half-close: that one still reads its answers).
        for task in inFlight.cancelledOnClose.values { task.cancel() }
        inFlight.cancelledOnClose = [:]
        pressure.dropHeld()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // A line that will not be handled (the caller was refused, or the connection closed
        // while the lines of its last read were still being passed on) is wiped as it is
        // dropped: it may be a login.answer whose value only handling it would have wiped.
        if caller.refused || !context.channel.isActive { return buffer.wipeReadableBytes() }
        if !pressure.held.isEmpty || paused(context) {
            pressure.held.append(buffer)
        } else {
            handle(context, buffer)
        }
        tellGuard(context)
    }

    /// Tells the connection guard when reading stops or resumes, so the time a started line
    /// waits unread in the socket is not taken for the client's stall.
    /// Tells it too while answers are being worked on, or events are sent (a subscription):
    /// the guard keeps half-closure on for them, so a peer that closes its writing side
    /// still gets them.
    private func tellGuard(_ context: ChannelHandlerContext) {
        let owes = inFlight.pending > 0 || subscription != nil
        if owes != pressure.owing {
            pressure.owing = owes
            context.triggerUserOutboundEvent(AnswersOwed(owed: owes), promise: nil)
        }
        let now = !pressure.held.isEmpty || paused(context)
        guard now != pressure.holding else { return }
        pressure.holding = now
        context.triggerUserOutboundEvent(ReadsHeld(held: now), promise: nil)
    }

    /// Reading stops while the peer does not drain its answers or while the connection has
    /// as many requests in flight as it may.
    private func paused(_ context: ChannelHandlerContext) -> Bool {
        inFlight.pending >= rules.limits.maxRequestsInFlightPerConnection || !context.channel.isWritable
    }

    func read(context: ChannelHandlerContext) {
        if !pressure.held.isEmpty || paused(context) {
            pressure.readWanted = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { resume(context) }
        context.fireChannelWritabilityChanged()
    }

    /// Handles the held lines while nothing pauses the connection, then reads again.
    private func resume(_ context: ChannelHandlerContext) {
        guard !pressure.resuming else { return }
        pressure.resuming = true
        defer { pressure.resuming = false }
        while !paused(context), let line = pressure.held.popFirst() {
            handle(context, line)
        }
        tellGuard(context)
        guard pressure.held.isEmpty, !paused(context) else { return }
        closeIfDone(context)
        if pressure.readWanted, context.channel.isActive {
            pressure.readWanted = false
            context.read()
        }
    }

    private func handle(_ context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        if LineFraming.isBlank(buffer.readableBytesView) { return }
        rules.countRequest()
        // One pass over the bytes for the requests clients send; JSONDecoder for the rest.
        let scanned = buffer.withUnsafeReadableBytes { ScannedRequest.scan($0) }
        let line = RequestLine(scanned: scanned, bytes: buffer, asker: caller.peer?.credentials?.pid)
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
            // A notification is never answered, not even with an error (JSON-RPC 2.0 §4.1):
            // a client would take an error with id null for the answer to its next request.
            return fail(context, id, RPCError(.methodNotFound, "there is no method \"\(method.prefix(64))\": see docs/protocol.md for the methods"),
                        answer: header.hasID)
        }
        guard let peer = caller.peer else { return }
        let reply = handler(line, id, codec, peer.identify, caller.answers)
        // A notification (no id) is carried out but never answered (JSON-RPC 2.0 §4.1).
        let answer = header.hasID
        switch reply {
        case .now(let data):
            if peer.changed {
                // The process that connected is gone or runs another program: nothing more
                // is served on this connection.
                caller.refused = true
                context.writeAnswer(data, then: .close)
            } else if answer {
                write(context, data)
            }
        case .later, .untilClosed, .subscription:
            startWork(context, reply, id: id, answer: answer, mints: table.mints(method))
        }
    }

    /// Starts the work of an answer that comes later, and writes the answer when it is done;
    /// carries out a change to the connection's subscription (the connection is the
    /// subscriber), then writes its answer.
    /// - Parameter mints: the answer is a token the cache did not have: the requests its work
    ///   sends to a provider are charged to the connection's `cache_misses_per_minute`
    ///   (`ConnectionAllowance`), and refused past it.
    private func startWork(_ context: ChannelHandlerContext, _ reply: Reply, id: RequestID, answer: Bool, mints: Bool = false) {
        switch reply {
        case .now:
            return
        case .subscription(let change, let data):
            carryOut(context, change, answer: answer ? data : nil, id: id)
        case .later(let work), .untilClosed(let work):
            if let refusal = rules.startWork() {
                if answer { write(context, codec.failure(id, refusal)) }
                return
            }
            inFlight.pending += 1
            let activity = rules.server.activity
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let key = inFlight.newKey()
            let origin = inFlight.origin
            let allowance = mints ? inFlight.allowance : nil
            let (pid, executable, inspector) = (caller.peer?.credentials?.pid, caller.peer?.executableID, caller.inspector)
            let task = Task {
                let data = await LaterWork.run(work, asker: pid, executable: executable, inspector: inspector, origin: origin, allowance: allowance)
                activity.finished()
                loop.execute {
                    let (handler, context) = bound.value
                    handler.inFlight.cancelledOnClose[key] = nil
                    handler.inFlight.pending -= 1
                    if answer { handler.write(context, data) }
                    handler.resume(context)
                }
            }
            if case .untilClosed = reply { inFlight.cancelledOnClose[key] = task }
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event {
            inFlight.inputClosed = true
            if caller.refused { return context.close(promise: nil) }
            closeIfDone(context)
        } else if event is ConnectionNotReading {
            // Its answers have waited unread for too long: what is queued is dropped.
            rules.server.logger.info("closing a connection that does not read its answers", metadata: ["pid": "\(caller.peer?.credentials.map { String($0.pid) } ?? "unknown")"])
            pressure.dropHeld()
            context.close(promise: nil)
        } else if event is ConnectionIdle {
            // The lifecycle never says idle while answers are owed (`AnswersOwed`); a
            // subscriber waits for events, however long none comes.
            if subscription == nil { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let e = error as? LineFrameDecoder.LineTooLong {
            rules.server.counters.errors.increment()
            rules.server.logger.notice("request line over the size cap; closing the connection", metadata: ["limit": "\(e.limit)"])
            context.writeAnswer(codec.failure(.null, RPCError(.requestTooLarge, "the request line is longer than \(e.limit) bytes; the connection is closed", data: ErrorData(limit: e.limit))), then: .close)
            return
        }
        rules.server.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// Closes a connection whose peer closed its writing side once nothing is owed to it.
    /// The decision is the connection's lifecycle's, in its guard, as on the front door's
    /// connections (`ConnectionLifecycle.settled`): it knows what is owed (answers in the
    /// works or a subscription, lines held, answers not yet taken) from what it was told.
    private func closeIfDone(_ context: ChannelHandlerContext) {
        guard inFlight.inputClosed else { return }
        context.triggerUserOutboundEvent(SettleAfterPeerDone(), promise: nil)
    }

    /// Counts an error, and answers it unless the request was a notification (`answer` false).
    func fail(_ context: ChannelHandlerContext, _ id: RequestID, _ error: RPCError, answer: Bool = true) {
        rules.server.counters.errors.increment()
        if answer { write(context, codec.failure(id, error)) }
    }

    func write(_ context: ChannelHandlerContext, _ data: Data) {
        context.writeAnswer(data)
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
