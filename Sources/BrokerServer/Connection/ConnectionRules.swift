import BrokerProtocol

/// The server's rules for every connection, wherever it is held: the front door (its fast
/// path) and NIO's pipeline both call these, so each is written once: the connection cap,
/// the requests-in-flight cap, request counting, and closing once the peer is done (which
/// both ask through the connection's lifecycle, `ConnectionLifecycle.settled`).
struct ConnectionRules: Sendable {
    let limits: ConnectionLimits
    /// What the rules report to: counters, activity, the refusal log.
    let server: ServerContext

    /// Whether a new connection of the daemon's user, with `others` open besides it, is
    /// served: nil when it is, else the refusal to answer it with (logged at a bounded
    /// rate). Applied at accept, rules or not: a flood of connections costs a write and a
    /// close each.
    func refusal(connectingWith others: Int) -> RPCError? {
        let max = limits.maxConnections
        guard others >= max else { return nil }
        server.refusals.refused("connection limit reached; refusing connections", ["limit": "\(max)"], logger: server.logger)
        return RPCError(.overloaded, "authbrokerd has \(max) connections open already; close some and try again", data: ErrorData(limit: max))
    }

    /// A request line is taken in, to be answered (a blank line is not a request).
    func countRequest() {
        server.counters.requests.increment()
        server.activity.touch()
    }

    /// Whether the work of an answer that comes later may start: nil when it may (it is
    /// counted in the requests in flight until `finished`), else the answer to give: every
    /// connection's work together is capped, since one caller pausing its own reads cannot
    /// protect the daemon from many connections. A refusal is counted as an error.
    func startWork() -> RPCError? {
        let limit = limits.maxRequestsInFlight
        guard server.activity.requestsInFlight < limit else {
            server.counters.errors.increment()
            server.logger.debug("requests in flight at the limit; refusing", metadata: ["limit": "\(limit)"])
            return LaterWork.overloaded(limit: limit)
        }
        server.activity.started()
        return nil
    }

    /// What a connection still owes its peer, for `closesOncePeerDone`.
    struct Owing: Equatable, Sendable {
        /// Answers in the works, or a subscription's events.
        var answers = false
        /// Input taken or waiting that is not answered yet: a started line, lines held back
        /// or waiting in the socket.
        var input = false
        /// Answers written that the socket has not taken yet.
        var unsent = false

        static let nothing = Owing()
    }

    /// Whether a connection whose peer closed its writing side (`peerDone`) closes now:
    /// once nothing is owed to it. A half-closed peer still reads its answers, and a
    /// subscriber its events until it hangs up.
    static func closesOncePeerDone(_ peerDone: Bool, owing: Owing) -> Bool {
        peerDone && owing == .nothing
    }
}
