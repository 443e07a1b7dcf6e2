#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// Waits for the first of some signals, delivered on a dispatch queue rather than in a
/// signal handler.
enum Signals {
    /// Dispatch sources live on one serial queue; this box is only touched there.
    private final class Watch: @unchecked Sendable {
        var sources: [any DispatchSourceSignal] = []
        var fired = false
    }

    static func wait(for signals: [Int32]) async -> Int32 {
        await withCheckedContinuation { continuation in
            let queue = DispatchQueue(label: "authbrokerd.signals")
            let watch = Watch()
            queue.sync {
                for number in signals {
                    signal(number, SIG_IGN)
                    let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                    source.setEventHandler {
                        guard !watch.fired else { return }
                        watch.fired = true
                        watch.sources.forEach { $0.cancel() }
                        continuation.resume(returning: number)
                    }
                    watch.sources.append(source)
                    source.resume()
                }
            }
        }
    }
}
