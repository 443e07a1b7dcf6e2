import BrokerCore
import BrokerServer

/// Decides when a socket-activated daemon may exit: `[daemon] idle_exit` seconds with no
/// open connection, no request in flight and no sign-in in progress. systemd keeps the
/// listening socket and starts the daemon again on the next connection.
struct IdleWatch: Sendable {
    let broker: Broker
    let activity: ServerActivity

    /// How long the daemon has been idle, or nil while it is busy.
    func idleSeconds() -> Double? {
        guard activity.openConnections == 0, activity.requestsInFlight == 0, broker.signIns.inProgress == 0 else {
            return nil
        }
        return activity.secondsSinceLastActivity
    }

    /// Returns once the daemon has been idle for the configured time; never while
    /// `idle_exit` is 0. Re-reads the setting each round, so a reload takes effect.
    func wait() async {
        while !Task.isCancelled {
            let limit = Double(broker.config.daemon.idleExit)
            let pause: Double
            if limit <= 0 {
                pause = 60
            } else if let idle = idleSeconds() {
                if idle >= limit { return }
                pause = limit - idle + 0.05
            } else {
                // Busy: look again soon; the end of the busy spell restarts the count.
                pause = min(limit, 5)
            }
            do {
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            } catch {
                return
            }
        }
    }
}
