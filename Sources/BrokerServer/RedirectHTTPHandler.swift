import BrokerCore
import NIOCore
import NIOHTTP1

/// One connection to a sign-in's loopback listener. Answers the first request and closes:
/// 404 for any path but `/callback`, the screen's refusal (400) for a `/callback` that is
/// not the sign-in's, and for the sign-in's own redirect holds the connection until the
/// broker answers it with how the sign-in went.
final class RedirectHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let waiting: RedirectWaiting
    /// The request head arrived: the rest of what the peer sends is ignored.
    private var seenHead = false
    private var headTimer: Scheduled<Void>?

    init(waiting: RedirectWaiting) {
        self.waiting = waiting
    }

    func channelActive(context: ChannelHandlerContext) {
        // A peer that connects and sends nothing holds only its own connection, and only
        // for so long.
        let channel = context.channel
        headTimer = context.eventLoop.scheduleTask(in: LoopbackRedirects.headTimeout) { channel.close(promise: nil) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        headTimer?.cancel()
        waiting.release(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data), !seenHead else { return }
        seenHead = true
        headTimer?.cancel()
        waiting.headArrived(context.channel)
        guard head.method == .GET else {
            return respond(context, status: .methodNotAllowed, html: nil)
        }
        let target = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard target.first == "/callback" else {
            return respond(context, page: SignInPage.notFound)
        }
        guard let query = waiting.screen.accept(target.count == 2 ? target[1] : "") else {
            return respond(context, page: waiting.screen.refused)
        }
        let channel = context.channel
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let waiting = self.waiting
        let redirect = BrowserRedirect(query: query) { page in
            // Out of the listener's hands: closing the listener must not cut this page off.
            waiting.release(channel)
            channel.eventLoop.execute {
                let (handler, context) = bound.value
                handler.respond(context, page: page)
            }
        }
        switch waiting.offer(redirect) {
        case .taken: break
        case .late: respond(context, page: waiting.screen.late)
        case .closed: context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Not HTTP, or a head over the size caps: answered when nothing was yet.
        if !seenHead, error is HTTPParserError {
            seenHead = true
            headTimer?.cancel()
            return respond(context, status: .badRequest, html: nil)
        }
        context.close(promise: nil)
    }

    private func respond(_ context: ChannelHandlerContext, page: SignInPage) {
        respond(context, status: HTTPResponseStatus(statusCode: page.status), html: page.html)
    }

    private func respond(_ context: ChannelHandlerContext, status: HTTPResponseStatus, html: String?) {
        guard context.channel.isActive else { return }
        var body = context.channel.allocator.buffer(capacity: html?.utf8.count ?? 0)
        if let html { body.writeString(html) }
        var headers = HTTPHeaders()
        if html != nil { headers.add(name: "Content-Type", value: "text/html; charset=utf-8") }
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        // The page has no script and loads nothing; a frame elsewhere may not show it.
        headers.add(name: "Content-Security-Policy", value: "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        if status == .methodNotAllowed { headers.add(name: "Allow", value: "GET") }
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
