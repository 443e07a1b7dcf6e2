/// The connections the front door holds, by descriptor, and their limits. Used on the
/// front door's thread only.
final class HeldConnections {
    let limits: ConnectionLimits
    /// By descriptor: descriptors are small integers, and the slot of a request's connection
    /// is found without hashing (a dictionary's lookups were ~500 instructions a request).
    /// Grows to the highest descriptor held; a slot costs 8 bytes.
    private var slots: [FrontDoor.Connection?] = []
    private var count = 0
    /// When the connections' deadlines were last looked at (CLOCK_MONOTONIC ns).
    private var lastSweep: UInt64 = 0

    init(limits: ConnectionLimits) {
        self.limits = limits
    }

    var isEmpty: Bool { count == 0 }
    var all: [FrontDoor.Connection] { slots.compactMap { $0 } }

    subscript(fd: CInt) -> FrontDoor.Connection? {
        let i = Int(fd)
        return i >= 0 && i < slots.count ? slots[i] : nil
    }

    /// A new connection, idle in its lifecycle.
    func add(_ fd: CInt, now: UInt64) -> FrontDoor.Connection {
        let connection = FrontDoor.Connection(fd: fd, limits: limits, now: now)
        let i = Int(fd)
        if i >= slots.count { slots.append(contentsOf: repeatElement(nil, count: i + 1 - slots.count)) }
        if slots[i] == nil { count += 1 }
        slots[i] = connection
        return connection
    }

    /// False when the connection was not held (closed or handed over already; its
    /// descriptor may be another connection's by now).
    func remove(_ connection: FrontDoor.Connection) -> Bool {
        let i = Int(connection.fd)
        guard i >= 0, i < slots.count, slots[i] === connection else { return false }
        slots[i] = nil
        count -= 1
        return true
    }

    /// At most once a second: what each connection's lifecycle says about the time now
    /// (closing the idle, the stalled), for those that must act; nil between sweeps.
    func sweep(now: UInt64) -> [(FrontDoor.Connection, ConnectionLifecycle.Action)]? {
        guard now &- lastSweep >= 1_000_000_000 else { return nil }
        lastSweep = now
        return slots.compactMap { slot in
            guard let connection = slot else { return nil }
            let action = connection.life.timeReached(now)
            return action == .none ? nil : (connection, action)
        }
    }
}
