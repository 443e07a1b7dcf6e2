import NIOCore

/// Splits the byte stream into `\n`-terminated lines (`LineFraming`: a trailing `\r` is
/// dropped, a line longer than the cap is refused instead of buffered without end) and passes
/// each on as a `ByteBuffer` of its own.
///
/// Why not NIO's `ByteToMessageHandler`: it merges a line that comes in several reads in
/// buffers this code never sees (the channel's pooled receive buffers, a merge buffer's
/// storage left behind when it grows), so the pieces of a `login.answer` line stayed in the
/// daemon's memory after the line itself was wiped (docs/security.md). Here a line that ends
/// in the read it started in is passed on as a slice of that read, as before (no copy); the
/// start of a line whose `\n` has not come is copied into a buffer of the decoder's own, and
/// every piece of it is wiped where it was read, and so is that buffer's old storage when it
/// grows.
final class LineFrameDecoder: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Thrown when a line exceeds the cap; the connection is answered and closed.
    struct LineTooLong: Error {
        let limit: Int
    }

    let maxLength: Int
    /// The start of a line whose `\n` has not come yet, in storage of its own.
    private var started: ByteBuffer?
    /// Reads that came while a line was being passed on (a handler after this one read the
    /// channel again): framed after it, in order.
    private var queued: [ByteBuffer] = []
    private var framing = false
    /// The input ended while a read was being framed: the last line is passed on after it.
    private var endedWhileFraming = false
    /// A line was too long, or the input ended: what still comes is dropped, wiped.
    private var done = false

    init(maxLength: Int) {
        self.maxLength = maxLength
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var read = unwrapInboundIn(data)
        guard !done else { return read.wipeReadableBytes() }
        guard !framing else { return queued.append(read) }
        framing = true
        frame(context, &read)
        while !queued.isEmpty {
            var next = queued.removeFirst()
            if done { next.wipeReadableBytes() } else { frame(context, &next) }
        }
        framing = false
        if endedWhileFraming { endOfInput(context) }
    }

    /// Passes on every line of `read`, the one started before it first.
    private func frame(_ context: ChannelHandlerContext, _ read: inout ByteBuffer) {
        if started != nil, !finishStarted(context, &read) { return }
        while !done, read.readableBytes > 0 {
            switch read.withUnsafeReadableBytes({ LineFraming.next($0, maxLength: maxLength) }) {
            case .line(let length, let consumed):
                guard let line = read.getSlice(at: read.readerIndex, length: length) else { return }
                read.moveReaderIndex(forwardBy: consumed)
                context.fireChannelRead(wrapInboundOut(line))
            case .needMoreData:
                keep(context, &read)
                return
            case .tooLong:
                return fail(context, &read)
            }
        }
    }

    /// Adds the start of `read`, up to its first `\n`, to the line started before it, and
    /// passes that line on once it is whole. Returns false when the line is still not whole
    /// (all of `read` was taken) or too long.
    private func finishStarted(_ context: ChannelHandlerContext, _ read: inout ByteBuffer) -> Bool {
        let newline = read.withUnsafeReadableBytes { LineFraming.newline(in: $0) }
        append(context, &read, count: newline.map { $0 + 1 } ?? read.readableBytes)
        guard newline != nil else {
            if !started!.withUnsafeReadableBytes({ LineFraming.fits($0, maxLength: maxLength) }) { fail(context, &read) }
            return false
        }
        guard case .line(let length, _) = started!.withUnsafeReadableBytes({ LineFraming.next($0, maxLength: maxLength) }),
              let line = started!.getSlice(at: started!.readerIndex, length: length)
        else {
            fail(context, &read)
            return false
        }
        started = nil
        context.fireChannelRead(wrapInboundOut(line))
        return true
    }

    /// Starts a line with the rest of `read`, which has no `\n`.
    private func keep(_ context: ChannelHandlerContext, _ read: inout ByteBuffer) {
        started = context.channel.allocator.buffer(capacity: max(2 * read.readableBytes, 1024))
        append(context, &read, count: read.readableBytes)
    }

    /// Moves `count` bytes from the front of `read` to the started line, wiping them in
    /// `read`. The started line grows into new storage, the old one wiped: `ByteBuffer`'s own
    /// growth would `realloc` and leave its bytes in freed memory.
    private func append(_ context: ChannelHandlerContext, _ read: inout ByteBuffer, count: Int) {
        guard let piece = read.readSlice(length: count) else { return }
        if started!.writableBytes < count {
            var bigger = context.channel.allocator.buffer(capacity: max(2 * started!.capacity, started!.readableBytes + count))
            bigger.writeImmutableBuffer(started!)
            started!.wipeReadableBytes()
            started = bigger
        }
        started!.writeImmutableBuffer(piece)
        piece.wipeReadableBytes()
    }

    /// Refuses a line over the cap: what was read of it and after it is dropped, wiped.
    private func fail(_ context: ChannelHandlerContext, _ read: inout ByteBuffer) {
        done = true
        started?.wipeReadableBytes()
        started = nil
        read.wipeReadableBytes()
        context.fireErrorCaught(LineTooLong(limit: maxLength))
    }

    /// A last line without its `\n` (a client that half-closes after writing) still counts.
    private func endOfInput(_ context: ChannelHandlerContext) {
        guard !framing else { return endedWhileFraming = true }
        endedWhileFraming = false
        guard !done else { return }
        done = true
        if let last = started {
            started = nil
            context.fireChannelRead(wrapInboundOut(last))
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .some(.inputClosed) { endOfInput(context) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        endOfInput(context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        started?.wipeReadableBytes()
        started = nil
        for read in queued { read.wipeReadableBytes() }
        queued = []
    }
}
