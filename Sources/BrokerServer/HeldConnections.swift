/// The connections the front door holds, by descriptor, and their limits. Used on the
/// front door's thread only.
final class HeldConnections {
    let limits: FrontDoor.Limits
    private let lifecycleLimits: ConnectionLifecycle.Limits
    private var connections: [CInt: FrontDoor.Connection] = [:]
    /// When the connections' deadlines were last looked at (CLOCK_MONOTONIC ns).
    private var lastSweep: UInt64 = 0

    init(limits: FrontDoor.Limits) {
        self.limits = limits
        self.lifecycleLimits = limits.lifecycle
    }

    var isEmpty: Bool { connections.isEmpty }
    var all: [FrontDoor.Connection] { Array(connections.values) }

    subscript(fd: CInt) -> FrontDoor.Connection? { connections[fd] }

    /// A new connection, idle in its lifecycle.
    func add(_ fd: CInt, now: UInt64) -> FrontDoor.Connection {
        let connection = FrontDoor.Connection(fd: fd, limits: lifecycleLimits, now: now)
        connections[fd] = connection
        return connection
    }

    /// False when the connection was not held (closed or handed over already).
    func remove(_ connection: FrontDoor.Connection) -> Bool {
        connections.removeValue(forKey: connection.fd) != nil
    }

    /// At most once a second: what each connection's lifecycle says about the time now
    /// (closing the idle, the stalled), for those that must act; nil between sweeps.
    func sweep(now: UInt64) -> [(FrontDoor.Connection, ConnectionLifecycle.Action)]? {
        guard now &- lastSweep >= 1_000_000_000 else { return nil }
        lastSweep = now
        return connections.values.compactMap { connection in
            let action = connection.life.timeReached(now)
            return action == .none ? nil : (connection, action)
        }
    }
}
