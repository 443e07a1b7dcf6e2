import COpenSSL
import Synchronization

/// A small HTTP/1.1 client for talking to OAuth providers: plain TCP or TLS (OpenSSL),
/// one request per connection, no redirects, no cookies, no cache, no compression.
///
/// Each request runs on its own thread under one deadline (`timeout` seconds from the
/// first connect to the last byte; a request given an `answerTimeout` may read its answer
/// longer, once it is written) and stops at once when its task is cancelled.
/// Proxies come from the environment as curl reads them (see `ProxySettings`); loopback
/// hosts are never proxied. Errors name the host, never the path or query.
public struct HTTPClient: Sendable {
    /// One answer: a 3xx arrives as such, header names lowercased.
    public struct Response: Sendable, Equatable {
        /// The status code of the final (non-1xx) response.
        public var status: Int
        /// Header fields, names lowercased, repeated fields joined with ", ".
        public var headers: [String: String]
        /// The body, decoded from chunked transfer-coding when it was sent so.
        public var body: [UInt8]

        /// Makes a response.
        public init(status: Int, headers: [String: String], body: [UInt8]) {
            self.status = status
            self.headers = headers
            self.body = body
        }
    }

    /// Seconds allowed for one whole request.
    public let timeout: Double
    /// The largest body accepted, in bytes.
    public let maximumBodySize: Int
    let proxies: ProxySettings
    private let tls: SharedTLSContext

    /// Makes a client whose proxies come from this process's environment and whose TLS
    /// trust is the system CA store (or `SSL_CERT_FILE` / `SSL_CERT_DIR`).
    public init(timeout: Double, maximumBodySize: Int) {
        self.init(timeout: timeout, maximumBodySize: maximumBodySize, proxies: .fromProcessEnvironment(), trust: .system)
    }

    /// Makes a client with explicit proxy settings and TLS trust (tests, tools).
    public init(timeout: Double, maximumBodySize: Int, proxies: ProxySettings, trust: TLSTrust) {
        self.timeout = timeout
        self.maximumBodySize = max(0, maximumBodySize)
        self.proxies = proxies
        self.tls = SharedTLSContext(trust: trust)
    }

    /// Sends one request and returns the final answer, whatever its status.
    ///
    /// - Parameters:
    ///   - method: "GET", "POST", …
    ///   - url: an absolute `http://` or `https://` URL; path and query are sent as given.
    ///   - headers: extra header fields; Host, Content-Length and Connection are the client's.
    ///   - body: the body to send, with a Content-Length.
    ///   - timeout: seconds for this request, when not the client's `timeout`.
    ///   - answerTimeout: seconds from now the answer may take once the request is written
    ///     (longer than `timeout`: a provider that has the request may still act on it);
    ///     connecting and writing stay bounded by `timeout`. Nil: `timeout` throughout.
    public func send(method: String, url: String, headers: [String: String] = [:], body: [UInt8]? = nil,
                     timeout: Double? = nil, answerTimeout: Double? = nil) async throws(HTTPClientError) -> Response {
        let endpoint = try Endpoint(url)
        guard let signal = CancelSignal() else {
            throw .system(host: endpoint.displayName, reason: "the process is out of file descriptors")
        }
        let deadlines = RequestDeadlines(sendSeconds: timeout ?? self.timeout, answerSeconds: answerTimeout)
        let wire = Wire(host: endpoint.displayName, deadlines: deadlines, cancel: signal)
        let result: Result<Response, HTTPClientError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Response, HTTPClientError>, Never>) in
                let started = WorkerThread.start {
                    let outcome: Result<Response, HTTPClientError>
                    do throws(HTTPClientError) {
                        outcome = .success(try perform(method: method, endpoint: endpoint, headers: headers, body: body, wire: wire))
                    } catch {
                        outcome = .failure(error)
                    }
                    signal.close()
                    continuation.resume(returning: outcome)
                }
                if !started {
                    signal.close()
                    continuation.resume(returning: .failure(.system(host: wire.host, reason: "no thread could be started for the request")))
                }
            }
        } onCancel: {
            signal.fire()
        }
        return try result.get()
    }

    /// The blocking request, on the worker thread.
    private func perform(method: String, endpoint: Endpoint, headers: [String: String], body: [UInt8]?,
                         wire: Wire) throws(HTTPClientError) -> Response {
        let proxy: ProxyServer?
        switch proxies.choice(for: endpoint) {
        case .direct: proxy = nil
        case .proxy(let server): proxy = server
        case .unusable(let variable):
            throw .proxyFailed(proxy: variable, host: wire.host, reason: "\(variable) is not an http://host:port proxy URL")
        }

        let socket: Socket
        if let proxy {
            do {
                socket = try Socket.connect(host: proxy.host, port: proxy.port, wire: wire)
            } catch {
                throw Self.proxyError(error, proxy: proxy, host: wire.host)
            }
        } else {
            socket = try Socket.connect(host: endpoint.host, port: endpoint.port, wire: wire)
        }
        let plain = PlainStream(socket: socket, wire: wire)

        let stream: any ByteStream
        var target = endpoint.target
        var proxyAuthorization: String?
        switch endpoint.scheme {
        case .https:
            if let proxy { try ProxyTunnel.open(through: plain, proxy: proxy, to: endpoint, wire: wire) }
            guard let context = tls.context() else {
                throw .tlsHandshakeFailed(host: wire.host, reason: "OpenSSL could not load the trusted certificates")
            }
            stream = try TLSSession(socket: socket, endpoint: endpoint, context: context, wire: wire)
        case .http:
            if let proxy {
                target = endpoint.absoluteForm
                proxyAuthorization = proxy.authorization
            }
            stream = plain
        }

        let head = try RequestHead.make(method: method, target: target, endpoint: endpoint, headers: headers,
                                        bodyLength: body?.count, proxyAuthorization: proxyAuthorization)
        // The request's bytes carry secrets (a refresh token, a client secret, a typed
        // password): wiped once written, not left in freed memory.
        var request = head + (body ?? [])
        defer { request.withUnsafeMutableBytes { if let start = $0.baseAddress { OPENSSL_cleanse(start, $0.count) } } }
        try stream.write(request)
        wire.deadlines.requestWritten()
        var parser = ResponseParser(stream: stream, host: wire.host, limit: maximumBodySize)
        return try parser.readResponse(method: method)
    }

    private static func proxyError(_ error: HTTPClientError, proxy: ProxyServer, host: String) -> HTTPClientError {
        switch error {
        case .connectionRefused: return .proxyFailed(proxy: proxy.description, host: host, reason: "the proxy refused the connection")
        case .hostNotResolved: return .proxyFailed(proxy: proxy.description, host: host, reason: "the proxy's host name could not be resolved")
        case .networkUnreachable, .connectionLost:
            return .proxyFailed(proxy: proxy.description, host: host, reason: "the proxy could not be reached")
        default: return error
        }
    }
}

/// The client's `SSL_CTX`, made on first use (loading a CA store costs time and memory a
/// plain-http client never needs) and then shared by every request of every copy.
final class SharedTLSContext: Sendable {
    private let trust: TLSTrust
    private let made = Mutex<TLSContext?>(nil)

    init(trust: TLSTrust) {
        self.trust = trust
    }

    /// The context, or nil when OpenSSL could not make it (tried again next time).
    func context() -> TLSContext? {
        made.withLock { made in
            if let made { return made }
            made = TLSContext(trust: trust)
            return made
        }
    }
}
