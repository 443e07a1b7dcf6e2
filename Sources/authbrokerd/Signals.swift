#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// Delivers signals on a dispatch queue rather than in a signal handler, for as long as
/// the returned ``Subscription`` is kept.
enum Signals {
    /// The dispatch sources of one ``watch(_:handler:)``; they live and die on `queue`.
    final class Subscription: @unchecked Sendable {
        fileprivate let queue = DispatchQueue(label: "authbrokerd.signals")
        fileprivate var sources: [any DispatchSourceSignal] = []

        /// Stops delivering; the signals stay ignored.
        func cancel() {
            queue.sync {
                sources.forEach { $0.cancel() }
                sources = []
            }
        }
    }

    /// Calls `handler` with each of `signals` as it arrives, on a serial queue. Returns once
    /// every source is armed, so that a signal sent after it returns is delivered.
    static func watch(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) -> Subscription {
        let subscription = Subscription()
        let armed = DispatchGroup()
        subscription.queue.sync {
            for number in signals {
                // The default action (terminate) must not race the dispatch source.
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: subscription.queue)
                source.setEventHandler { handler(number) }
                armed.enter()
                source.setRegistrationHandler { armed.leave() }
                subscription.sources.append(source)
                source.resume()
            }
        }
        // A source is armed some time after resume(), on dispatch's own thread; a signal that
        // comes before meets SIG_IGN and is lost. The daemon says READY=1 after this returns,
        // and systemd may send SIGHUP or SIGTERM right after it (seen: 1 in 5 lost under load).
        armed.wait()
        return subscription
    }

    /// The conventional name, for the log.
    static func name(_ number: Int32) -> String {
        switch number {
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        default: return "signal \(number)"
        }
    }
}
