import BrokerCore
import NIOCore

/// One connection to a sign-in's loopback listener. Answers the first request and closes:
/// 400 for what is not an HTTP/1.x request head (`RedirectRequestHead`), 405 for any method
/// but GET, 404 for any path but the screen's (`/callback` for a sign-in), the screen's refusal (400) for a `/callback`
/// that is not the sign-in's, and for the sign-in's own redirect holds the connection until
/// the broker answers it with how the sign-in went.
final class RedirectHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let waiting: RedirectWaiting
    private var reader = RedirectRequestHead.Reader()
    /// The request head arrived (or was refused): the rest of what the peer sends is ignored.
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
        guard !seenHead else { return }
        let reading = reader.read(unwrapInboundIn(data).readableBytesView)
        guard reading != .incomplete else { return }
        seenHead = true
        headTimer?.cancel()
        waiting.headArrived(context.channel)
        guard case .head(let head) = reading else {
            return respond(context, status: 400, html: nil)
        }
        guard head.method == "GET" else {
            return respond(context, status: 405, html: nil)
        }
        let target = head.target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = target.first, path == waiting.screen.path else {
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
        context.close(promise: nil)
    }

    private func respond(_ context: ChannelHandlerContext, page: SignInPage) {
        respond(context, status: page.status, html: page.html)
    }

    private func respond(_ context: ChannelHandlerContext, status: Int, html: String?) {
        guard context.channel.isActive else { return }
        let response = Self.response(status: status, html: html)
        var bytes = context.channel.allocator.buffer(capacity: response.utf8.count)
        bytes.writeString(response)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(bytes)).whenComplete { _ in channel.close(promise: nil) }
    }

    /// The whole response: the status line, the headers every page gets, and the page.
    static func response(status: Int, html: String?) -> String {
        var head = "HTTP/1.1 \(status) \(reason(status))\r\n"
        if html != nil { head += "Content-Type: text/html; charset=utf-8\r\n" }
        head += "Content-Length: \(html?.utf8.count ?? 0)\r\n"
        head += "Cache-Control: no-store\r\n"
        head += "Referrer-Policy: no-referrer\r\n"
        // The page has no script and loads nothing; a frame elsewhere may not show it.
        head += "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'\r\n"
        head += "X-Content-Type-Options: nosniff\r\n"
        if status == 405 { head += "Allow: GET\r\n" }
        head += "Connection: close\r\n\r\n"
        return head + (html ?? "")
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        default: "Error"
        }
    }
}
