import BrokerCore
import BrokerServer
import CLinux

/// Hands memory the heap has freed back to the system when the daemon goes quiet.
///
/// glibc keeps freed memory for reuse rather than returning it. A refresh allocates and
/// frees tens of kilobytes (the answer, its JSON, the ID token's verification) around the
/// one token it leaves in the cache, so after a burst of refreshes most of the heap is free
/// but still resident: 1 000 refreshes left 9.5 MB of it in the benchmark
/// (docs/performance.md). A burst of connections leaves the same behind (each one's buffers
/// and channel), even when every answer came from the cache. The daemon trims once after
/// start-up, then after any refresh or request once nothing has happened for a few
/// seconds; never on the path of a request.
///
/// The first of those trims waits for a much shorter quiet (``firstQuiet``): start-up leaves
/// the most behind (the keyring's session, the configuration, every library's
/// initialisation), and a daemon just started, at login or by its first connection, is
/// looked at right then (`ps`, `systemctl --user status`). A request that comes while it
/// waits moves the trim on, as for any other; it only costs the next request the minor
/// faults below, once.
///
/// The quiet trim also hands back the pages of code and read-only data the daemon mapped
/// (``releaseFilePages()``): most of an idle daemon's resident memory is its image and its
/// libraries as far as start-up, sign-in and refreshes touched them, and the kernel maps
/// 64 KB around every page that faults. The next request maps what it runs again, from the
/// page cache: about 60 minor faults once (docs/performance.md).
struct MemoryTrim: Sendable {
    let broker: Broker
    let activity: ServerActivity
    /// Seconds without requests before a trim.
    var quiet: Double = 5
    /// Seconds without requests before the first trim after start-up.
    var firstQuiet: Double = 0.3

    /// Trims now: `malloc_trim(0)` releases the free pages of every arena.
    static func trim() {
        _ = clinux_malloc_trim()
    }

    /// Unmaps the pages of the read-only segments of the daemon and its libraries (relocated
    /// RELRO pages are left alone): they stay in the page cache, and come back as minor faults
    /// when used.
    static func releaseFilePages() {
        _ = clinux_release_file_pages()
    }

    /// Trims after start-up, refreshes and requests, when quiet, until cancelled.
    func run() async {
        // nil: start-up's pages are handed back once it has been quiet for the first time.
        var trimmedAt: (refreshes: Int, activity: UInt64)?
        var pause = firstQuiet
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: .milliseconds(Int(pause * 1000)))
            } catch {
                return
            }
            let wanted = trimmedAt == nil ? firstQuiet : quiet
            pause = quiet
            let now = (refreshes: broker.counters.refreshes.load(ordering: .relaxed), activity: activity.lastActivity)
            guard trimmedAt.map({ $0 != now }) ?? true else { continue }
            let idle = activity.secondsSinceLastActivity
            let inFlight = activity.requestsInFlight
            guard inFlight == 0, idle >= wanted else {
                // Something happened and it is not quiet yet: look again when it could be, or
                // in half a second while a request is worked on (a sign-in's wait takes minutes).
                pause = max(inFlight > 0 ? 0.5 : wanted / 10, wanted - idle)
                continue
            }
            Self.trim()
            Self.releaseFilePages()
            trimmedAt = now
        }
    }
}
