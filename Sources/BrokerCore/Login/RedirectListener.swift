import HTTPClient

/// Opens the loopback listener a browser sign-in's redirect comes back to (RFC 8252 §7.3).
///
/// BrokerCore only says what it wants; the HTTP server lives with the other server code
/// (BrokerServer's `LoopbackRedirectListener`, on swift-nio), so this module stays free
/// of any network framework.
public protocol RedirectListening: Sendable {
    /// Binds `127.0.0.1:port` (0: an ephemeral port) and serves until closed. Requests to
    /// `/callback` that `screen` refuses are answered with its page and the wait goes on;
    /// other paths get 404.
    func listen(port: UInt16, screen: RedirectScreen) async throws(BrokerError) -> any RedirectListener
}

/// One sign-in's listener.
public protocol RedirectListener: Sendable {
    /// The port bound on 127.0.0.1.
    var port: UInt16 { get }
    /// The first redirect the screen accepted, kept open until it is answered; nil when the
    /// listener was closed or the waiting task cancelled.
    func redirect() async -> BrowserRedirect?
    /// Stops accepting and frees the port; returns once the port is free. Idempotent.
    func close() async
}

/// Which requests to `/callback` belong to the sign-in.
public struct RedirectScreen: Sendable {
    /// The decoded query of a request for this sign-in, or nil for one that is not.
    public let accept: @Sendable (_ rawQuery: Substring) -> [String: String]?
    /// The page for a request that is not for this sign-in (a wrong or missing `state`).
    public let refused: SignInPage
    /// The page for a second redirect after the sign-in's own arrived.
    public let late: SignInPage
    /// The one path served (`/callback` for a sign-in); any other gets 404.
    public let path: String

    public init(accept: @escaping @Sendable (Substring) -> [String: String]?, refused: SignInPage, late: SignInPage,
                path: String = "/callback") {
        self.accept = accept
        self.refused = refused
        self.late = late
        self.path = path
    }

    /// Accepts only a redirect whose `state` equals the sign-in's.
    static func expecting(state: String, provider: String) -> RedirectScreen {
        RedirectScreen(
            accept: { raw in
                let query = RedirectQuery.parse(raw)
                guard let got = query["state"], constantTimeEqual(got, state) else { return nil }
                return query
            },
            refused: SignInPage.notThisSignIn(provider: provider),
            late: SignInPage.alreadyAnswered(provider: provider))
    }
}

/// The browser's redirect for the sign-in, its connection held until `answer`.
public struct BrowserRedirect: Sendable {
    public let query: [String: String]
    private let respond: @Sendable (SignInPage) -> Void

    public init(query: [String: String], respond: @escaping @Sendable (SignInPage) -> Void) {
        self.query = query
        self.respond = respond
    }

    /// Sends the page and closes the browser's connection.
    public func answer(_ page: SignInPage) { respond(page) }
}

/// A redirect's query string as name → value; a name given twice is ambiguous and kept as
/// "" so that the checks that read it fail.
enum RedirectQuery {
    static func parse(_ raw: Substring) -> [String: String] {
        var query: [String: String] = [:]
        for pair in raw.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = PercentDecoding.decode(kv[0], plusIsSpace: true)
            if query[name] != nil {
                query[name] = ""
            } else {
                query[name] = kv.count == 2 ? PercentDecoding.decode(kv[1], plusIsSpace: true) : ""
            }
        }
        return query
    }
}
