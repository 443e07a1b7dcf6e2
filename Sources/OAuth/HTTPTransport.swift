/// One HTTP request to a provider. Bodies may hold secrets: never log them.
public struct HTTPRequest: Sendable, Equatable {
    /// "GET" or "POST".
    public var method: String
    /// An absolute `https://` (or loopback `http://`) URL.
    public var url: String
    /// Header fields; a transport sends each once.
    public var headers: [String: String]
    /// The request body, if any (form-encoded for POST).
    public var body: [UInt8]?
    /// Seconds the whole request may take, when it needs another deadline than the
    /// transport's own (a refresh: `refresh_timeout`); nil takes the transport's.
    public var timeout: Double?
    /// Seconds from the start the answer may take once the request is written, when longer
    /// than `timeout` (a refresh's late answer: the provider has the request and may act on
    /// it); connecting and sending stay bounded by `timeout`. Nil: `timeout` throughout.
    public var answerTimeout: Double?

    /// Makes a request.
    public init(method: String, url: String, headers: [String: String] = [:], body: [UInt8]? = nil,
                timeout: Double? = nil, answerTimeout: Double? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.answerTimeout = answerTimeout
    }
}

/// The provider's answer. A 3xx arrives as such: transports do not follow redirects.
public struct HTTPResponse: Sendable, Equatable {
    /// The HTTP status code.
    public var status: Int
    /// Header fields, names lowercased.
    public var headers: [String: String]
    /// The body, at most `NetworkTransport.maximumBodySize` bytes from that transport.
    public var body: [UInt8]

    /// Makes a response; header names are lowercased.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }
}

/// Sends HTTP requests for `OAuthClient`. Implementations must not follow redirects, must
/// not store cookies, and must report failures to connect as `OAuthError.unreachable`
/// with a sentence that names the host but not the URL's query.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the answer, whatever its status.
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse
}
