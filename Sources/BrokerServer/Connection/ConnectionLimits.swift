import BrokerCore
import Logging

/// The limits every connection is held to, wherever it is held (the front door or NIO's
/// pipeline): the daemon's `[daemon]` settings, times in nanoseconds. The lifecycle reads
/// its timeouts here (`ConnectionLifecycle`), the caps are applied by `ConnectionRules`.
struct ConnectionLimits: Sendable, Equatable {
    /// Connections open at once; more are refused (-32009) (`[daemon] max_connections`).
    var maxConnections: Int
    /// With nothing to do (`[daemon] connection_idle_timeout`).
    var idleTimeout: UInt64
    /// For a started line to finish, and for the peer to take any of its answers
    /// (`[daemon] request_line_timeout`).
    var stallTimeout: UInt64
    /// Requests worked on at once by all connections; more are refused (-32009)
    /// (`[daemon] max_requests_in_flight`).
    var maxRequestsInFlight: Int
    /// Requests of one connection worked on at once; over it, reading pauses.
    var maxRequestsInFlightPerConnection: Int

    init(maxConnections: Int = DaemonSettings().maxConnections, idleTimeout: UInt64, stallTimeout: UInt64,
         maxRequestsInFlight: Int = DaemonSettings().maxRequestsInFlight,
         maxRequestsInFlightPerConnection: Int = DaemonSettings.maxRequestsInFlightPerConnection) {
        self.maxConnections = maxConnections
        self.idleTimeout = idleTimeout
        self.stallTimeout = stallTimeout
        self.maxRequestsInFlight = maxRequestsInFlight
        self.maxRequestsInFlightPerConnection = maxRequestsInFlightPerConnection
    }

    /// The daemon's settings.
    init(_ daemon: DaemonSettings) {
        self.init(maxConnections: daemon.maxConnections,
                  idleTimeout: UInt64(max(daemon.connectionIdleTimeout, 0)) * 1_000_000_000,
                  stallTimeout: UInt64(max(daemon.requestLineTimeout, 0)) * 1_000_000_000,
                  maxRequestsInFlight: daemon.maxRequestsInFlight)
    }
}

/// What the server's connections report to, wherever they are held: the counters, the
/// open connections and requests in flight (for the idle exit), the rate-limited log of
/// refusals, the logger, the events hub, and how callers' programs are read. One value,
/// built once by `BrokerServer.start` and shared by the front door and every pipeline.
struct ServerContext: Sendable {
    let counters: BrokerCounters
    let activity: ServerActivity
    /// Refusals of other users and past the caps, logged at a bounded rate.
    let refusals: RefusalLog
    let logger: Logger
    /// Where `events.subscribe` registers a connection; nil where events are not served.
    let events: EventHub?
    /// Reads what callers run, for the `[[allow]]` rules and the audit trail.
    let inspector: ProcessInspector

    init(counters: BrokerCounters, activity: ServerActivity, refusals: RefusalLog = RefusalLog(), logger: Logger,
         events: EventHub? = nil, inspector: ProcessInspector = .direct) {
        self.counters = counters
        self.activity = activity
        self.refusals = refusals
        self.logger = logger
        self.events = events
        self.inspector = inspector
    }
}
