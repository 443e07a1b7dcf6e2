import BrokerCore
import BrokerServer
import CLinux

/// Hands memory the heap has freed back to the system when the daemon goes quiet.
///
/// glibc keeps freed memory for reuse rather than returning it. A refresh allocates and
/// frees tens of kilobytes (the answer, its JSON, the ID token's verification) around the
/// one token it leaves in the cache, so after a burst of refreshes most of the heap is free
/// but still resident: 1 000 refreshes left 9.5 MB of it in the benchmark
/// (docs/performance.md). The daemon trims once after start-up, then after any refresh once
/// nothing has happened for a few seconds; never on the path of a request.
struct MemoryTrim: Sendable {
    let broker: Broker
    let activity: ServerActivity
    /// Seconds without requests before a trim.
    var quiet: Double = 5

    /// Trims now: `malloc_trim(0)` releases the free pages of every arena.
    static func trim() {
        _ = clinux_malloc_trim()
    }

    /// Trims after refreshes, when quiet, until cancelled.
    func run() async {
        var trimmedAt = broker.counters.refreshes.load(ordering: .relaxed)
        var pause = quiet
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            } catch {
                return
            }
            pause = quiet
            let refreshes = broker.counters.refreshes.load(ordering: .relaxed)
            guard refreshes != trimmedAt else { continue }
            let idle = activity.secondsSinceLastActivity
            guard activity.requestsInFlight == 0, idle >= quiet else {
                // Refreshes happened and it is not quiet yet: look again when it could be.
                pause = max(0.5, quiet - idle)
                continue
            }
            Self.trim()
            trimmedAt = refreshes
        }
    }
}
