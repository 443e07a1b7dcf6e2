import NIOCore

/// Splits the byte stream into `\n`-terminated lines (a trailing `\r` is dropped), and
/// refuses a line longer than the cap instead of buffering without end.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// Thrown when a line exceeds the cap; the connection is answered and closed.
    struct LineTooLong: Error {
        let limit: Int
    }

    let maxLength: Int

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        switch buffer.withUnsafeReadableBytes({ LineFraming.next($0, maxLength: maxLength) }) {
        case .needMoreData:
            return .needMoreData
        case .tooLong:
            throw LineTooLong(limit: maxLength)
        case .line(let length, let consumed):
            guard let line = buffer.getSlice(at: buffer.readerIndex, length: length) else { return .needMoreData }
            buffer.moveReaderIndex(forwardBy: consumed)
            context.fireChannelRead(Self.wrapInboundOut(line))
            return .continue
        }
    }

    /// A last line without its `\n` (a client that half-closes after writing) still counts.
    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        if buffer.readableBytes > 0, let rest = buffer.readSlice(length: buffer.readableBytes) {
            context.fireChannelRead(Self.wrapInboundOut(rest))
        }
        return .needMoreData
    }
}
