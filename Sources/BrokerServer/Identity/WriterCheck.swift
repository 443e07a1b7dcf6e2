#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerProtocol
import Logging
import NIOCore

/// Under `[[allow]]` rules: every byte the daemon reads from a connection was written by the
/// process that connected (threads included: the kernel names the thread group), or the
/// connection is refused and closed. Without this, a process could connect, leave a child
/// holding the socket, and run an allowed program: the daemon would identify the allowed
/// program and serve the child (docs/security.md).
///
/// How, given that NIO reads a stream socket with read(2), which drops ancillary data:
/// - `SO_PASSCRED` is on for the connection from its first byte (on the listening socket
///   while rules are in force, copied to each connection by the kernel), so the kernel
///   records the writer (pid, uid, gid) of every message and never joins bytes of two
///   writers in one read(2).
/// - Before each read(2), NIO asks the channel's `RecvByteBufferAllocator` for the next
///   buffer's size (`NIOPooledRecvBufferAllocator.buffer`, once per read, right before the
///   call); ours answers after a `recvmsg(MSG_PEEK)` of the first unread byte, which tells
///   the writer of what that read(2) returns: only the daemon reads the socket, so the
///   queue's head cannot change in between, and the read stops where another writer's
///   bytes begin. NIO reads once per readable event here (`maxMessagesPerRead` 1), so the
///   queue is not empty at the peek (but after the peer's end of input, when nothing more
///   can arrive); should bytes arrive between a peek at an empty queue and the read, their
///   writer is unknown and they are refused.
/// - `WriterCheck`, first in the pipeline, takes the verdict of that peek for each chunk
///   read, before the line framing sees a byte. A chunk without a verdict from its own peek
///   (an empty queue, no credentials, an NIO that no longer asks the allocator) is refused
///   like a stranger's: the check fails closed.
/// That order (the allocator asked right before each read(2), not after the previous one)
/// is NIO's, not a promise of its API: `WriterCheckOnNIOTests` run the check on NIO's real
/// socket channel and fail when it changes (the connecting process's own requests would be
/// refused, closed, never let through). The order was kept rather than replaced by reading
/// the socket ourselves with recvmsg: that would take reads, and so back-pressure, out of
/// NIO's hands.
/// Reads stay in NIO's hands, so back-pressure (the RPC handler's held reads) and order are
/// as without rules. Cost: one recvmsg per read, on connections under rules only.
final class WriterCheck: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let gate: WriterGate
    private let logger: Logger
    private let counters: BrokerCounters
    private var refused = false
    /// The connection's codec, which writes the refusal.
    private let codec: RPCCodec

    private init(gate: WriterGate, logger: Logger, counters: BrokerCounters, codec: RPCCodec) {
        self.codec = codec
        self.gate = gate
        self.logger = logger
        self.counters = counters
    }

    /// Puts the check in front of `channel`'s pipeline; false when the connection's socket
    /// is not known (then nothing it sends may pass a policy). `descriptor` is the socket the
    /// front door accepted and handed to NIO (`Handover`). Call in `channelActive`, before
    /// the first read.
    static func install(on channel: any Channel, descriptor: CInt?, pid: Int32, uid: UInt32, logger: Logger, counters: BrokerCounters,
                        codec: RPCCodec) -> Bool {
        guard let fd = descriptor else {
            logger.error("cannot find the socket of a connection to check who writes on it; its requests are refused under [[allow]] rules")
            return false
        }
        let gate = WriterGate(fd: fd, pid: pid, uid: uid)
        do {
            let options = channel.syncOptions
            guard let options else { return false }
            try options.setOption(.maxMessagesPerRead, value: 1)
            let inner = try options.getOption(.recvAllocator)
            try options.setOption(.recvAllocator, value: PeekingAllocator(inner: inner, gate: gate))
            try channel.pipeline.syncOperations.addHandler(WriterCheck(gate: gate, logger: logger, counters: counters, codec: codec), position: .first)
        } catch {
            logger.error("cannot check who writes on a connection; its requests are refused under [[allow]] rules", metadata: ["error": "\(error)"])
            return false
        }
        return true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        switch gate.take() {
        case .connecting:
            context.fireChannelRead(data)
        case .other(let pid):
            refuse(context, writer: String(pid))
        case .unknown:
            refuse(context, writer: "unknown")
        }
    }

    private func refuse(_ context: ChannelHandlerContext, writer: String) {
        refused = true
        counters.errors.increment()
        logger.notice("refused a request written by another process than the one that connected; closing the connection",
                      metadata: ["pid": "\(gate.pid)", "writer": "\(writer)"])
        let who = writer == "unknown" ? "a process the kernel did not name" : "process \(writer)"
        context.writeAnswer(codec.failure(.null, RPCError(.forbidden, "forbidden by policy: this request was written by \(who), another process than the one that opened the connection (pid \(gate.pid)); the connection is closed: let the program that asks open its own connection")), then: .close)
    }
}

/// One connection's writer, as the last peek found it. Used on the channel's event loop
/// only (the allocator is called from NIO's read, the handler from the pipeline); it is
/// `Sendable` because `RecvByteBufferAllocator` must be.
final class WriterGate: @unchecked Sendable {
    enum Writer { case connecting, other(Int32), unknown }

    /// The connection's socket: NIO's own descriptor, used only while NIO reads it (so open).
    private let fd: CInt
    let pid: Int32
    private let uid: UInt32
    /// The writer of the bytes the coming read(2) returns; taken by the chunk it read.
    private var next: Writer?

    init(fd: CInt, pid: Int32, uid: UInt32) {
        self.fd = fd
        self.pid = pid
        self.uid = uid
    }

    /// Learns the writer of the first unread byte, right before NIO reads.
    func peek() {
        var head = PeerCredentials.firstWriter(fd)
        if case .noCredentials = head {
            // A connection queued before the listening socket had SO_PASSCRED (the first one
            // under socket activation): switched on now. Bytes it sent before the daemon
            // accepted it carry their writer anyway; any sent since carry none (pid 0).
            var on: CInt = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<CInt>.size))
            head = PeerCredentials.firstWriter(fd)
        }
        switch head {
        case .writer(let pid, let uid):
            // pid 0: bytes the kernel recorded no writer for (sent before SO_PASSCRED was on).
            next = pid == self.pid && uid == self.uid ? .connecting : pid > 0 ? .other(pid) : .unknown
        case .empty, .noCredentials, .failed: next = .unknown
        }
    }

    /// The verdict on the chunk just read; `.unknown` when no peek preceded it.
    func take() -> Writer {
        defer { next = nil }
        return next ?? .unknown
    }
}

/// The channel's receive-buffer sizing, unchanged, with the peek before each read.
private struct PeekingAllocator: RecvByteBufferAllocator {
    var inner: any RecvByteBufferAllocator
    let gate: WriterGate

    func buffer(allocator: ByteBufferAllocator) -> ByteBuffer {
        inner.buffer(allocator: allocator)
    }

    /// Called once per read, immediately before it (see `WriterCheck`).
    func nextBufferSize() -> Int? {
        gate.peek()
        return inner.nextBufferSize()
    }

    mutating func record(actualReadBytes: Int) -> Bool {
        inner.record(actualReadBytes: actualReadBytes)
    }
}
