/// Why a request failed. Every case names the server only as `host` ("host" or
/// "host:port", as the URL gave it), never the path or the query, which may carry codes,
/// so callers can put it in a sentence a user reads.
public enum HTTPClientError: Error, Sendable, Equatable {
    /// The URL is not an absolute `http://` or `https://` URL this client can send;
    /// `reason` says what is wrong without quoting the URL.
    case invalidURL(reason: String)
    /// The host name did not resolve to any address.
    case hostNotResolved(host: String)
    /// Every address of the host refused the connection.
    case connectionRefused(host: String)
    /// No route to the host or the network is down.
    case networkUnreachable(host: String)
    /// This computer has no way to the host now (`HostNetwork`): no route to it, its
    /// link is down, or no network to look its name up; `reason` is the sentence, naming
    /// the host, with the next step.
    case noNetwork(host: String, reason: String)
    /// The whole request, connection to last byte, did not finish within the time-out.
    case timedOut(host: String)
    /// The connection broke, or the server closed it before the answer was complete.
    case connectionLost(host: String)
    /// The server answered the TLS handshake with something that is not TLS: a plain HTTP
    /// (or other) server on the URL's port.
    case tlsNotSpoken(host: String)
    /// The TLS handshake failed for a reason other than the certificate.
    case tlsHandshakeFailed(host: String, reason: String)
    /// The server's certificate did not verify against the trusted CAs; `reason` is
    /// OpenSSL's short verification message.
    case certificateNotTrusted(host: String, reason: String)
    /// The server's certificate (or, for an IP address in the URL, its addresses) does not
    /// name the host the URL names; `reason` is OpenSSL's short verification message.
    case certificateNameMismatch(host: String, reason: String)
    /// A certificate of the server's chain has expired or is not valid yet, by this
    /// computer's clock; `reason` is OpenSSL's short verification message.
    case certificateOutOfDate(host: String, reason: String)
    /// The server answered something that is not an HTTP/1.x response.
    case notHTTP(host: String)
    /// The answer's body is larger than the client's `maximumBodySize` (`limit` bytes).
    case bodyTooLarge(host: String, limit: Int)
    /// The response's header fields (or a chunk's size line, or its trailer fields) run past
    /// `ResponseParser.maximumHeadSize`, 64 KiB.
    case headTooLarge(host: String)
    /// The calling task was cancelled.
    case cancelled(host: String)
    /// The proxy (`proxy` as "host:port") could not be used to reach `host`: it refused
    /// the connection, refused the tunnel (e.g. 407 or 502), or its setting is unusable.
    case proxyFailed(proxy: String, host: String, reason: String)
    /// The operating system refused a resource the request needs (a socket, a thread).
    case system(host: String, reason: String)

    /// One sentence for logs and users; it names the host, never the path or query.
    public var message: String {
        switch self {
        case .invalidURL(let reason): return "the URL is not usable: \(reason)"
        case .hostNotResolved(let host): return "cannot reach \(host): the host name could not be resolved"
        case .connectionRefused(let host): return "cannot reach \(host): connection refused"
        case .networkUnreachable(let host): return "cannot reach \(host): the network is unreachable"
        case .noNetwork(_, let reason): return reason
        case .timedOut(let host): return "cannot reach \(host): no answer in time"
        case .connectionLost(let host): return "cannot reach \(host): the connection was lost"
        case .tlsNotSpoken(let host):
            return "cannot reach \(host): it does not speak TLS there (it answered plain HTTP or another protocol); check the scheme and the port in the URL"
        case .tlsHandshakeFailed(let host, let reason): return "cannot reach \(host): the TLS handshake failed (\(reason))"
        case .certificateNotTrusted(let host, let reason):
            return "cannot reach \(host): its TLS certificate is not trusted (\(reason)); add the CA that issued it to the system CA store, or name a CA file in SSL_CERT_FILE"
        case .certificateNameMismatch(let host, let reason):
            return "cannot reach \(host): its TLS certificate does not name \(host) (\(reason)); use the host name the certificate lists in the URL, or have the provider's certificate name this one"
        case .certificateOutOfDate(let host, let reason):
            return "cannot reach \(host): its TLS certificate is out of date (\(reason)); check this computer's clock, or have the provider renew its certificate"
        case .notHTTP(let host): return "\(host) answered something that is not HTTP"
        case .bodyTooLarge(let host, let limit): return "\(host) sent an answer larger than \(limit) bytes"
        case .headTooLarge(let host): return "\(host) sent response header fields larger than 64 KiB"
        case .cancelled(let host): return "the request to \(host) was cancelled"
        case .proxyFailed(let proxy, let host, let reason): return "cannot reach \(host) through the proxy \(proxy): \(reason)"
        case .system(let host, let reason): return "cannot reach \(host): \(reason)"
        }
    }
}
