#if canImport(FoundationEssentials)
import FoundationEssentials
#endif
import BrokerProtocol

/// A connection to authbrokerd, the per-user OAuth 2.0 / OpenID Connect token broker.
///
/// authbrokerd keeps the user's refresh tokens and mints access tokens on demand; it
/// serves JSON-RPC 2.0 on a Unix socket, one JSON text per line
/// (`$AUTHBROKER_SOCKET`, else `$XDG_RUNTIME_DIR/authbroker/socket`). This class is that
/// protocol's client: `authctl` is built on it, and any Swift program can do what
/// `authctl` does with it.
///
/// ```swift
/// import BrokerClient
/// import BrokerProtocol
///
/// do {
///     let broker = try BrokerConnection()
///     let token = try broker.token(TokenGetParams(resource: "https://api.example.com", minTTL: 60))
///     request.setValue("Bearer \(token.accessToken)", forHTTPHeaderField: "Authorization")
/// } catch .rpc(let error) where error.kind == .loginRequired {
///     print(error.message)   // "not signed in to corp: run `authctl login --provider corp`"
/// } catch {
///     print("no token: \(error)")
/// }
/// ```
///
/// What to expect:
/// - Calls are synchronous and block the calling thread until the daemon answers. Most
///   answer in well under a millisecond from cache; `token.get` may wait for a refresh at
///   the provider. Every call but `login.wait` (which waits for the user) gives up after
///   ``callTimeout`` (default ``defaultCallTimeout``, 15 s) with ``ClientError/timedOut(method:after:)``:
///   a socket-activated daemon that cannot start leaves a client in the socket's backlog,
///   and nothing else would end that wait. Pass `timeout:` to choose per call.
/// - One connection carries many calls, one at a time, with ids 1, 2, 3…. A connection is
///   not `Sendable`: use it from one thread or task, and open another connection for
///   concurrent calls — connecting is one `connect(2)` on a local socket.
/// - Failures are typed (``ClientError``): a JSON-RPC error answer is
///   ``ClientError/rpc(_:)``, whose `kind` (`RPCErrorCode`) tells login-required from
///   forbidden, provider errors and so on.
/// - After a transport failure (``ClientError/io(_:)``, an overlong response) the
///   connection is closed and every later call fails; open a new one. After a timeout the
///   connection stays usable: the late answer is recognised by its id and skipped.
public final class BrokerConnection {
    /// The longest response line accepted. A `daemon.status` answer with many providers and
    /// cached tokens is a few kilobytes; anything near this cap is not a real answer.
    public static let maxResponseBytes = 1 << 20

    /// How long a call waits for its answer unless it is given its own `timeout:`: long
    /// enough for a cold start and a refresh at a provider (each bounded by the daemon's
    /// `store_timeout` and `http_timeout`, 10 s by default), short enough that a daemon
    /// that never answers is reported while the user still waits.
    public static let defaultCallTimeout: Duration = .seconds(15)

    /// The socket path this connection was opened to.
    public let path: String

    /// How long a call without its own `timeout:` waits for its answer; nil waits as long as
    /// the daemon takes. ``loginWait(_:timeout:)`` never uses it: a sign-in takes as long
    /// as the user does.
    public var callTimeout: Duration?

    private var socket: UnixSocket?
    private var nextID: Int64 = 1
    /// Bytes read but not yet consumed: the start of the next line, when a read returned
    /// more than one line or part of one.
    private var pending: [UInt8] = []
    // Made on first use: `token()`'s own wire path needs neither, and making them is a
    // good part of a short `authctl token` process (docs/performance.md).
    private lazy var encoder = JSONEncoder()
    private lazy var decoder = JSONDecoder()

    /// Connects to authbrokerd.
    ///
    /// - Parameters:
    ///   - path: the socket's path; nil means `SocketPath.resolve()`:
    ///     `$AUTHBROKER_SOCKET`, else `$XDG_RUNTIME_DIR/authbroker/socket`.
    ///   - callTimeout: the deadline of every call but `login.wait` that is not given its
    ///     own (``callTimeout``); nil waits as long as the daemon takes.
    /// - Throws: ``ClientError/noSocketPath`` when no path is given and neither variable is
    ///   set; ``ClientError/daemonNotRunning(path:)`` when nothing listens there;
    ///   ``ClientError/io(_:)`` for any other failure to connect (permissions, a path too
    ///   long for a Unix socket address).
    public init(path: String? = nil, callTimeout: Duration? = BrokerConnection.defaultCallTimeout) throws(ClientError) {
        guard let resolved = path ?? SocketPath.resolve() else { throw .noSocketPath }
        self.path = resolved
        self.callTimeout = callTimeout
        self.socket = try UnixSocket(connectingTo: resolved)
    }

    /// Closes the connection. Later calls fail with ``ClientError/io(_:)``. Dropping the
    /// last reference closes it too.
    public func close() {
        socket = nil
        pending = []
    }

    /// Calls `method` with `params` and decodes its result as `R`.
    ///
    /// The typed convenience methods (``token(_:timeout:)``, ``status(timeout:)``…) are
    /// this with the right types; use `call` for methods added to the daemon after them.
    ///
    /// - Parameters:
    ///   - method: the method to call.
    ///   - params: encoded as the request's `params` member (use `NoParams()` for none).
    ///   - as: the type of the response's `result` member.
    ///   - timeout: how long to wait for the answer; nil (the default) means ``callTimeout``.
    /// - Throws: ``ClientError/rpc(_:)`` when the daemon answers with an error, and the
    ///   other ``ClientError`` cases for transport and protocol failures.
    public func call<P: Encodable & Sendable, R: Decodable>(
        _ method: RPCMethod,
        _ params: P,
        as: R.Type = R.self,
        timeout: Duration? = nil
    ) throws(ClientError) -> R {
        try send(method, params, as: R.self, timeout: timeout ?? callTimeout)
    }

    /// ``call(_:_:as:timeout:)`` with `timeout` taken as given: nil waits without limit.
    /// `whenSent` runs once the request is on its way, before the answer is awaited.
    private func send<P: Encodable & Sendable, R: Decodable>(
        _ method: RPCMethod,
        _ params: P,
        as: R.Type,
        timeout: Duration?,
        whenSent: () -> Void = {}
    ) throws(ClientError) -> R {
        try exchange(method, timeout: timeout, whenSent: whenSent) { id throws(ClientError) in
            do {
                return Array(try encoder.encode(Request(id: .number(id), method: method, params: params)))
            } catch {
                throw .io("cannot encode the \(method.rawValue) request: \(error)")
            }
        } answer: { line, id throws(ClientError) in
            try decodeResponse(line, id: id, method: method)
        }
    }

    /// Sends the request `encode` writes for a fresh id and reads lines until `decode`
    /// returns the answer (nil: a late or blank line; read on).
    private func exchange<R>(
        _ method: RPCMethod,
        timeout: Duration?,
        whenSent: () -> Void = {},
        encode: (Int64) throws(ClientError) -> [UInt8],
        answer decode: (ArraySlice<UInt8>, Int64) throws(ClientError) -> R?
    ) throws(ClientError) -> R {
        guard let socket else {
            throw .io("the connection to authbrokerd on \(path) is closed; open a new one")
        }
        let id = nextID
        nextID += 1
        var line = try encode(id)
        line.append(UInt8(ascii: "\n"))

        let deadline = timeout.map { UnixSocket.now() + $0 }
        do {
            try socket.sendAll(line)
            whenSent()
            while true {
                let answer = try readLine(from: socket, method: method.rawValue, deadline: deadline, timeout: timeout)
                if let result = try decode(answer, id) {
                    return result
                }
            }
        } catch {
            // After a transport failure the stream's position is unknown: no later answer
            // could be trusted to belong to its request.
            if case .io = error { close() }
            throw error
        }
    }

    // MARK: - Methods

    /// `token.get`: an access token for a resource, from the daemon's cache or freshly
    /// minted with the account's refresh token.
    ///
    /// All parameters are optional: without `provider` the daemon uses its only provider,
    /// without `resource` the provider's default audience. `minTTL` asks for a token that
    /// stays valid at least that many seconds.
    public func token(_ params: TokenGetParams = TokenGetParams(), timeout: Duration? = nil) throws(ClientError) -> TokenGetResult {
        // The hot path of every script: no Codable unless the answer is unusual (an error).
        try exchange(.tokenGet, timeout: timeout ?? callTimeout) { id throws(ClientError) in
            TokenWire.request(id: id, params)
        } answer: { line, id throws(ClientError) in
            if let result = TokenWire.result(line, id: id) { return result }
            return try decodeResponse(line, id: id, method: .tokenGet)
        }
    }

    /// `token.get` with `wait_for_sign_in` set: an account that needs a sign-in waits for
    /// the provider's pending one (docs/sign-in.md). Waits that long (and a little more)
    /// whatever ``callTimeout`` says; `whenSent` runs once the daemon has the request, from
    /// when on closing the connection leaves the sign-in.
    public func tokenAfterSignIn(_ params: TokenGetParams, whenSent: () -> Void = {}) throws(ClientError) -> TokenGetResult {
        let timeout = params.waitForSignIn.map { Duration.seconds($0 + 30) } ?? callTimeout
        return try exchange(.tokenGet, timeout: timeout, whenSent: whenSent) { id throws(ClientError) in
            TokenWire.request(id: id, params)
        } answer: { line, id throws(ClientError) in
            if let result = TokenWire.result(line, id: id) { return result }
            return try decodeResponse(line, id: id, method: .tokenGet)
        }
    }

    /// `dpop.proof`: the token (as `token.get` gives it) and a DPoP proof (RFC 9449) for one
    /// request with it, signed inside the daemon. Send `Authorization: DPoP <access_token>`
    /// and `DPoP: <proof>`; a proof is good for one request only.
    /// `token.exchange`: a token for a downstream service, minted by the provider from the
    /// account's token (RFC 8693).
    public func exchangeToken(_ params: TokenExchangeParams, timeout: Duration? = nil) throws(ClientError) -> TokenGetResult {
        try call(.tokenExchange, params, as: TokenGetResult.self, timeout: timeout)
    }

    public func dpopProof(_ params: DPoPProofParams, timeout: Duration? = nil) throws(ClientError) -> DPoPProofResult {
        try call(.dpopProof, params, as: DPoPProofResult.self, timeout: timeout)
    }

    /// `token.reject`: tells the daemon an API refused a token (HTTP 401), so it drops it
    /// from its cache and the next ``token(_:timeout:)`` for that key refreshes.
    ///
    /// Pass the token itself (`accessToken`) or the key it was asked with (`resource`,
    /// `scopes`, `provider`, `account`). The answer's `dropped` is false when nothing was
    /// cached there any more.
    public func rejectToken(_ params: TokenRejectParams, timeout: Duration? = nil) throws(ClientError) -> TokenRejectResult {
        try call(.tokenReject, params, as: TokenRejectResult.self, timeout: timeout)
    }

    /// `account.list`: the accounts the daemon knows, with their provider and state
    /// (`ready` or `login_required`).
    public func accounts(timeout: Duration? = nil) throws(ClientError) -> AccountListResult {
        try call(.accountList, NoParams(), as: AccountListResult.self, timeout: timeout)
    }

    /// `login.start`: begins a sign-in and returns what the user must open or type.
    ///
    /// Follow it with ``loginWait(_:timeout:)`` on the returned `loginID`.
    public func loginStart(_ params: LoginStartParams, timeout: Duration? = nil) throws(ClientError) -> LoginStartResult {
        try call(.loginStart, params, as: LoginStartResult.self, timeout: timeout)
    }

    /// `login.wait`: waits until the user finishes (or abandons) the sign-in.
    ///
    /// Without a `timeout` this waits as long as the sign-in can take, whatever
    /// ``callTimeout`` says: the daemon answers with an error once the sign-in expires
    /// (`RPCErrorCode.loginFailed`). `whenSent` runs once the daemon has the request: from
    /// then on, closing this connection (Ctrl-C) cancels the sign-in, so that is the moment
    /// to show the user what to open.
    public func loginWait(_ params: LoginWaitParams, timeout: Duration? = nil,
                          whenSent: () -> Void = {}) throws(ClientError) -> LoginWaitResult {
        try send(.loginWait, params, as: LoginWaitResult.self, timeout: timeout, whenSent: whenSent)
    }

    /// `login.answer`: the user's answer to the question a terminal sign-in's `login.wait`
    /// returned. Follow it with another `login.wait`.
    public func loginAnswer(_ params: LoginAnswerParams, timeout: Duration? = nil) throws(ClientError) -> LoginAnswerResult {
        try call(.loginAnswer, params, as: LoginAnswerResult.self, timeout: timeout)
    }

    /// `logout`: revokes the account's refresh token at the provider, removes it from the
    /// secret store and forgets its cached access tokens.
    public func logout(_ params: LogoutParams = LogoutParams(), timeout: Duration? = nil) throws(ClientError) -> LogoutResult {
        try call(.logout, params, as: LogoutResult.self, timeout: timeout)
    }

    /// `events.subscribe`: from now on the daemon writes `event` notifications on this
    /// connection (docs/protocol.md); read them with ``nextEvent()``.
    public func subscribeEvents(_ params: EventsSubscribeParams = EventsSubscribeParams(),
                                timeout: Duration? = nil) throws(ClientError) -> EventsSubscribeResult {
        try call(.eventsSubscribe, params, as: EventsSubscribeResult.self, timeout: timeout)
    }

    /// The next `event` notification on a subscribed connection. Waits without a deadline:
    /// events come when something happens. Lines that are not events (a late answer) are
    /// skipped; the end of the connection is an error.
    public func nextEvent() throws(ClientError) -> BrokerEvent {
        guard let socket else {
            throw .io("the connection to authbrokerd on \(path) is closed; open a new one")
        }
        while true {
            let line: ArraySlice<UInt8>
            do {
                line = try readLine(from: socket, method: "events.subscribe", deadline: nil, timeout: nil)
            } catch {
                close()
                if case .io = error {
                    throw .io("authbrokerd closed the events connection on \(path): it stopped, or dropped this subscriber for not reading")
                }
                throw error
            }
            if let notification = try? decoder.decode(EventNotification.self, from: Data(line)), notification.method == "event" {
                return notification.params
            }
        }
    }

    /// `daemon.status`: the daemon's version, uptime, counters, providers, accounts and
    /// cached tokens (their expiry, never their value).
    public func status(timeout: Duration? = nil) throws(ClientError) -> DaemonStatusResult {
        try call(.daemonStatus, NoParams(), as: DaemonStatusResult.self, timeout: timeout)
    }

    // MARK: - Framing

    /// Returns the next complete line (without its `\n`), reading as often as needed.
    private func readLine(
        from socket: UnixSocket,
        method: String,
        deadline: Duration?,
        timeout: Duration?
    ) throws(ClientError) -> ArraySlice<UInt8> {
        var scanned = 0
        while true {
            if let newline = pending[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                guard newline <= Self.maxResponseBytes else { throw tooLong() }
                let line = pending[..<newline]
                pending.removeSubrange(...newline)
                return line
            }
            scanned = pending.count
            guard pending.count <= Self.maxResponseBytes else { throw tooLong() }
            let n = try socket.receive(appendingTo: &pending, deadline: deadline, method: method, timeout: timeout)
            if n == 0 {
                throw .io("authbrokerd closed the connection on \(path) before answering \(method)")
            }
        }
    }

    private func tooLong() -> ClientError {
        // The rest of the line is still unread and the stream cannot be resynchronised
        // cheaply: this connection is done.
        close()
        return .badResponse("a response line is longer than \(Self.maxResponseBytes) bytes")
    }

    /// Decodes one response line.
    ///
    /// - Returns: the result, or nil when the line is a late answer to an earlier call
    ///   (one that timed out) or blank, and the caller must read on.
    private func decodeResponse<R: Decodable>(_ line: ArraySlice<UInt8>, id: Int64, method: RPCMethod) throws(ClientError) -> R? {
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
            return nil
        }
        let data = Data(line)
        let envelope: ResponseEnvelope<R>
        do {
            envelope = try decoder.decode(ResponseEnvelope<R>.self, from: data)
        } catch {
            // The result did not decode as R. Before calling that a bad response, see
            // whether this is an error answer or someone else's answer.
            guard let header = try? decoder.decode(ResponseHeader.self, from: data) else {
                throw .badResponse("the answer to \(method.rawValue) is not a JSON-RPC response (\(Self.summary(error)))")
            }
            if Self.isEarlier(header.id, than: id) { return nil }
            if let rpcError = header.error { throw Self.answerError(rpcError, carrying: header.id, for: id) }
            throw .badResponse("the result of \(method.rawValue) does not have the expected shape (\(Self.summary(error)))")
        }
        if Self.isEarlier(envelope.id, than: id) { return nil }
        // A notification (an event, on a subscribed connection) comes between the answers.
        if envelope.method != nil, envelope.result == nil, envelope.error == nil { return nil }
        if let rpcError = envelope.error {
            throw Self.answerError(rpcError, carrying: envelope.id, for: id)
        }
        guard envelope.id == .number(id) else {
            throw .badResponse("the answer to request \(id) carries id \(envelope.id?.description ?? "none")")
        }
        guard let result = envelope.result else {
            throw .badResponse("the answer to \(method.rawValue) has neither result nor error")
        }
        return result
    }

    /// The error to throw for an error answer: ``ClientError/rpc(_:)`` when it is ours.
    ///
    /// JSON-RPC answers a request it could not parse (or a line over the daemon's size
    /// cap) with id null, so null counts as ours: only this call is outstanding.
    private static func answerError(_ error: RPCError, carrying answerID: RequestID?, for id: Int64) -> ClientError {
        guard answerID == .number(id) || answerID == .null || answerID == nil else {
            return .badResponse("an error answer carries id \(answerID?.description ?? "none") instead of \(id)")
        }
        return .rpc(error)
    }

    /// A decoding failure in a few words: which member, and what was wrong with it.
    private static func summary(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ keys: [any CodingKey], _ last: (any CodingKey)? = nil) -> String {
            let names = (keys + (last.map { [$0] } ?? [])).map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return names.isEmpty ? "the top level" : names.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath, key)) is missing"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath)) is null"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) is not a \(type)"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "\(path(context.codingPath)) is invalid"
        @unknown default:
            return "\(error)"
        }
    }

    /// True for the id of a request this connection sent before `current`.
    private static func isEarlier(_ id: RequestID?, than current: Int64) -> Bool {
        if case .number(let n)? = id, n >= 1, n < current { return true }
        return false
    }
}

@available(*, unavailable, message: "use a BrokerConnection from one thread or task; open one per task")
extension BrokerConnection: Sendable {}

/// A response as the client reads it: `result` or `error`, decoded in one pass.
private struct ResponseEnvelope<R: Decodable>: Decodable {
    var method: String?
    var id: RequestID?
    var result: R?
    var error: RPCError?
}
