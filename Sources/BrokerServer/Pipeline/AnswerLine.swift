#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore

/// What becomes of a connection once an answer line is written.
enum AfterAnswer {
    /// The connection goes on: the usual case.
    case keepOpen
    /// The connection is closed once the line is out (a request over the size cap, another
    /// user, a caller that has run another program since it connected).
    case close
    /// Only the writing side is closed, and the whole connection 5 s later: closing outright
    /// with the peer's request unread would reset the connection and lose the answer.
    case closeOutput
}

extension ChannelHandlerContext {
    /// Writes one JSON-RPC answer, `json` and a newline, and flushes: the one write path of
    /// every answer the server sends, whatever happens to the connection after it.
    func writeAnswer(_ json: Data, then after: AfterAnswer = .keepOpen) {
        guard channel.isActive else { return }
        var out = channel.allocator.buffer(capacity: json.count + 1)
        out.writeBytes(json)
        out.writeInteger(UInt8(ascii: "\n"))
        switch after {
        case .keepOpen:
            writeAndFlush(NIOAny(out), promise: nil)
        case .close:
            let channel = self.channel
            writeAndFlush(NIOAny(out)).whenComplete { _ in channel.close(promise: nil) }
        case .closeOutput:
            let channel = self.channel
            writeAndFlush(NIOAny(out)).whenComplete { _ in
                channel.close(mode: .output, promise: nil)
                channel.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
            }
        }
    }
}
