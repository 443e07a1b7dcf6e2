/// What one connection's handler (`RPCHandler`) shares with the server's other connections:
/// their counts, the limits on them, and the log of refusals past those.
struct ServerLimits {
    let activity: ServerActivity
    let refusals: RefusalLog
    let maxConnections: Int
    /// Requests of this connection worked on at once; over it, reading pauses.
    let maxInFlight: Int
    /// Requests worked on at once by all connections; over it, requests are refused (-32009).
    let maxInFlightTotal: Int
}
