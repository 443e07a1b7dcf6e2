import HTTPClient

/// `HTTPTransport` over authbroker's own HTTP/1.1 client (`HTTPClient`: TCP or TLS via
/// OpenSSL, no Foundation, no libcurl).
///
/// One connection per request: no cookies, no cache, no credential store. Redirects are
/// never followed; a 3xx comes back as the response. The whole request, connection to
/// last byte, must finish within `timeout`. A body larger than `maximumBodySize` is
/// abandoned and reported as `OAuthError.invalidResponse`. TLS trusts the system CA store
/// (or `SSL_CERT_FILE` / `SSL_CERT_DIR`); proxies come from the environment
/// (`https_proxy`, `no_proxy`, …; loopback hosts never use one).
public final class NetworkTransport: HTTPTransport {
    /// The largest answer body accepted: 1 MiB.
    public static let maximumBodySize = 1 << 20

    /// Seconds allowed for one whole request.
    public let timeout: Double
    private let client: HTTPClient

    /// Makes a transport whose requests each fail after `timeout` seconds.
    public init(timeout: Double = 10) {
        self.timeout = timeout
        self.client = HTTPClient(timeout: timeout, maximumBodySize: Self.maximumBodySize)
    }

    /// Sends `request`; see the type's description for the rules. The request's own
    /// `timeout`, when it has one, replaces the transport's; its `answerTimeout` lets the
    /// answer to a written request come later.
    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let deadline = request.timeout ?? timeout
        let start = ContinuousClock.now
        do throws(HTTPClientError) {
            let answer = try await client.send(method: request.method, url: request.url, headers: request.headers, body: request.body,
                                               timeout: deadline, answerTimeout: request.answerTimeout)
            return HTTPResponse(status: answer.status, headers: answer.headers, body: answer.body)
        } catch {
            // Which deadline passed: sending's, or (later) the answer's.
            let waited = Self.seconds(ContinuousClock.now - start)
            let passed = request.answerTimeout.map { waited > deadline + 0.5 ? max($0, deadline) : deadline } ?? deadline
            throw Self.map(error, url: request.url, timeout: passed)
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func seconds(_ interval: Double) -> String {
        interval == interval.rounded() ? "\(Int(interval)) s" : "\(interval) s"
    }

    /// Turns a transfer failure into a sentence naming only the host.
    static func map(_ error: HTTPClientError, url: String, timeout: Double) -> OAuthError {
        switch error {
        case .invalidURL:
            return .configuration("\(EndpointPolicy.describe(url)) is not an http(s) URL")
        case .connectionRefused(let host):
            return .unreachable("cannot reach \(host): connection refused")
        case .timedOut(let host):
            return .unreachable("cannot reach \(host): no answer within \(seconds(timeout))")
        case .hostNotResolved(let host):
            return .unreachable("cannot reach \(host): the host name could not be resolved")
        case .networkUnreachable(let host):
            return .unreachable("cannot reach \(host): the network is down")
        case .noNetwork(_, let reason):
            return .unreachable(reason)
        case .connectionLost(let host):
            return .unreachable("cannot reach \(host): the connection was lost")
        case .tlsHandshakeFailed(let host, let reason):
            return .unreachable("cannot reach \(host): the TLS handshake failed (\(reason))")
        case .certificateNotTrusted, .certificateNameMismatch, .certificateOutOfDate:
            // Each with the step that mends its own fault (the CA store, the URL, the clock).
            return .unreachable(error.message)
        case .notHTTP(let host):
            return .invalidResponse("\(host) answered something that is not HTTP")
        case .headTooLarge:
            return .invalidResponse(error.message)
        case .tlsNotSpoken:
            return .unreachable(error.message)
        case .bodyTooLarge(let host, _):
            return .invalidResponse("\(host) sent an answer larger than 1 MiB")
        case .cancelled(let host):
            return .unreachable("the request to \(host) was cancelled")
        case .proxyFailed(let proxy, let host, let reason):
            return .unreachable("cannot reach \(host) through the proxy \(proxy): \(reason); check https_proxy and no_proxy")
        case .system(let host, let reason):
            return .unreachable("cannot reach \(host): \(reason)")
        }
    }
}
