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
        guard let newline = buffer.readableBytesView.firstIndex(of: UInt8(ascii: "\n")) else {
            if buffer.readableBytes > maxLength { throw LineTooLong(limit: maxLength) }
            return .needMoreData
        }
        let length = newline - buffer.readerIndex
        if length > maxLength { throw LineTooLong(limit: maxLength) }
        guard var line = buffer.readSlice(length: length) else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: 1)
        if line.readableBytesView.last == UInt8(ascii: "\r") { line = line.getSlice(at: line.readerIndex, length: line.readableBytes - 1) ?? line }
        context.fireChannelRead(Self.wrapInboundOut(line))
        return .continue
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
