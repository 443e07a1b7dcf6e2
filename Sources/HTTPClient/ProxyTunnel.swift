/// Opens a CONNECT tunnel (RFC 9110 §9.3.6) through an http proxy to an https origin.
enum ProxyTunnel {
    /// Asks `proxy`, over `stream`, for a tunnel to `endpoint`; returns once the proxy
    /// answered 2xx. Any other answer is a `.proxyFailed` naming its status.
    static func open(through stream: PlainStream, proxy: ProxyServer, to endpoint: Endpoint, wire: Wire) throws(HTTPClientError) {
        var text = "CONNECT \(endpoint.authorityWithPort) HTTP/1.1\r\nHost: \(endpoint.authorityWithPort)\r\nUser-Agent: authbroker\r\n"
        if let authorization = proxy.authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
        text += "\r\n"
        var parser = ResponseParser(stream: stream, host: wire.host, limit: 0)
        let head: ResponseParser.Head
        do {
            try stream.write(Array(text.utf8))
            head = try parser.readHead()
        } catch {
            switch error {
            case .notHTTP, .connectionLost, .bodyTooLarge, .headTooLarge:
                throw .proxyFailed(proxy: proxy.description, host: wire.host, reason: "the proxy did not answer the CONNECT request with HTTP")
            default: throw error
            }
        }
        guard (200...299).contains(head.status) else {
            throw .proxyFailed(proxy: proxy.description, host: wire.host, reason: reason(head.status))
        }
        guard !parser.hasBufferedBytes else {
            throw .proxyFailed(proxy: proxy.description, host: wire.host, reason: "the proxy sent data before the TLS handshake")
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 407: return "it answered 407 (proxy authentication required); put user:password@ in the proxy URL"
        case 403: return "it answered 403 (the proxy does not allow this destination)"
        case 502, 503, 504: return "it answered \(status) (the proxy could not reach the server)"
        default: return "it answered \(status) to the CONNECT request"
        }
    }
}
