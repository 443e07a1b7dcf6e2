import BrokerCore
import BrokerServer
import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// Hands memory the heap has freed back to the system when the daemon goes quiet, when
/// there is enough of it to be worth the faults that bring it back.
///
/// glibc keeps freed memory for reuse rather than returning it. A refresh allocates and
/// frees tens of kilobytes (the answer, its JSON, the ID token's verification) around the
/// one token it leaves in the cache, so after a burst of refreshes most of the heap is free
/// but still resident: 1 000 refreshes left 9.5 MB of it in the benchmark
/// (docs/performance.md). A burst of connections leaves the same behind (each one's buffers
/// and channel), even when every answer came from the cache. The daemon trims once after
/// start-up, then once nothing has happened for a few seconds, and again while what was
/// freed after that trim adds up (``growth``); never on the path of a request, and from a
/// thread of its own (``start()``).
///
/// A trim costs the next request: every heap page it hands back that the request uses again
/// comes back as a minor fault, ten microseconds or more each on a virtual machine. So after
/// start-up's trim the daemon trims only when its private memory (resident anonymous pages)
/// grew by ``growth`` since the last one, or the last one handed back at least that much (a
/// burst's memory is freed over a while, as its connections close and time out, and the
/// next trims find more of it): after a burst, not after the occasional request, whose few
/// pages a trim would hand back only for the next request to fault them in again.
/// (It once also unmapped its code pages when quiet: ~60 faults on the next request for
/// clean file pages the kernel reclaims by itself under pressure; issue 25.)
///
/// The first trim waits for a much shorter quiet (``firstQuiet``): start-up leaves the most
/// behind (the keyring's session, the configuration, every library's initialisation), and a
/// daemon just started, at login or by its first connection, is looked at right then (`ps`,
/// `systemctl --user status`).
struct MemoryTrim: Sendable {
    let broker: Broker
    let activity: ServerActivity
    /// Seconds without requests before a trim.
    var quiet: Double = 5
    /// Seconds without requests before the first trim after start-up.
    var firstQuiet: Double = 0.3
    /// Bytes of private memory gained since the last trim that make the next one worth it.
    var growth = 256 << 10
    /// Also done at each look, on this thread that wakes anyway: the upgrade watch's `stat`.
    var alsoAtEachLook: (@Sendable () -> Void)?

    /// At most this many malloc heaps, the main one included, for the 7 threads the daemon
    /// keeps (main, the front door, the event loop, the trim, libdispatch's, GLib's two)
    /// and the concurrency pool's while they run.
    static let heaps: CInt = 3

    /// Shapes malloc for a daemon that is mostly idle between bursts; call before other
    /// threads start.
    ///
    /// - **Fewer heaps.** glibc gives each thread a heap of its own, up to 8 per CPU: 12–13
    ///   after the benchmark's loads, each with a few long-lived allocations (OpenSSL's
    ///   method store, the Swift runtime's metadata, libdispatch's and GLib's state) on
    ///   pages otherwise free. At most ``heaps``, the same allocations share pages: 0.08–0.12
    ///   MB less private memory after the loads at 4 heaps, 64 KB less idle, and ~75 KB less
    ///   again at 3 (docs/performance.md, "The daemon's memory"; 2 held more, the bursts' and
    ///   the long-lived allocations of all other threads in one heap). The threads are
    ///   mostly idle; two that allocate at the same
    ///   moment take turns for a heap's lock only when their own cache of freed chunks has
    ///   nothing of the size.
    /// - **No freed top kept.** glibc shrinks a thread's heap only at a free that leaves at
    ///   least 128 KiB free at its top, and then keeps `M_TOP_PAD` of that top, 128 KiB by
    ///   default, resident since the burst that grew it; `malloc_trim` never shrinks a
    ///   thread heap's top at all. So every heap a burst had grown kept 128 KiB resident for
    ///   good: 0.2–0.3 MB after the loads. With no pad, a heap grown again faults its pages
    ///   back in (minor faults, during a burst; an occasional request is served from the
    ///   free chunks the heap keeps).
    static func configureHeaps() {
        _ = clinux_malloc_configure(heaps)
    }

    /// Trims now: `malloc_trim(0)` releases the free pages of every arena.
    static func trim() {
        _ = clinux_malloc_trim()
    }

    /// Resident anonymous memory in bytes (resident minus file-backed and shared pages, from
    /// /proc/self/statm), or nil when it cannot be read.
    static func privateBytes() -> Int? {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        // "size resident shared text lib data dt", in pages.
        let fields = buffer[..<n].split(separator: UInt8(ascii: " ")).prefix(3).map { Int(String(decoding: $0, as: UTF8.self)) }
        guard fields.count == 3, let resident = fields[1], let shared = fields[2] else { return nil }
        return (resident - shared) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Starts `run` on a thread of its own; signalling the returned `StopSignal` ends it.
    /// nil when no thread (or eventfd) can be made: the daemon then serves without trims.
    ///
    /// Not a task on Swift's concurrency pool: a trim that wakes a pool thread every few
    /// seconds keeps that thread alive, and with it libdispatch's cache of the continuations
    /// it ran (up to 1 024 per thread). After a cold burst those were allocated on the event
    /// loop's thread in between the burst's connections, one every page or two, so a trim
    /// could hand back little of that heap for as long as the daemon ran (issue 25:
    /// ~0.6-4 MB of private memory, docs/performance.md "The daemon's memory"). Left
    /// alone, the pool's threads end 5 s after their last work and free their caches, and
    /// the next trim hands the pages back.
    func start() -> StopSignal? {
        guard let stop = StopSignal() else { return nil }
        let trim = self
        guard DaemonThread.start("authbroker-trim", { trim.run(stop) }) else { return nil }
        return stop
    }

    /// Trims after start-up, and after refreshes and requests that grew the heap, when quiet,
    /// until `stop` is signalled; and, when nothing happened since, once the heap holds
    /// ``growth`` more free bytes than after the last trim (what the pool's threads and a
    /// burst's connections freed after it).
    func run(_ stop: StopSignal) {
        // nil: start-up's pages are handed back once it has been quiet for the first time.
        var trimmedAt: (refreshes: Int, activity: UInt64)?
        // Private memory right after the last trim, and what that trim handed back.
        var keptAfterTrim = 0
        var handedBack = 0
        // The heap's free bytes right after the last trim.
        var freeAfterTrim = 0
        // Looks since the last trim: the first few come every second, while the memory a
        // burst leaves is still being freed.
        var looks = 0
        var pause = firstQuiet
        while !stop.wait(seconds: pause) {
            alsoAtEachLook?()
            let wanted = trimmedAt == nil ? firstQuiet : quiet
            looks += 1
            pause = looks <= Self.soonLooks ? 1 : quiet
            let now = (refreshes: broker.counters.refreshes.load(ordering: .relaxed), activity: activity.lastActivity)
            let held: Int?
            if let trimmedAt, trimmedAt == now {
                // Nothing happened: trim only what was freed since the last trim.
                guard Int(clinux_malloc_free_bytes()) - freeAfterTrim >= growth else { continue }
                held = Self.privateBytes()
            } else {
                let idle = activity.secondsSinceLastActivity
                let inFlight = activity.requestsInFlight
                guard inFlight == 0, idle >= wanted else {
                    // Something happened and it is not quiet yet: look again when it could be, or
                    // in half a second while a request is worked on (a sign-in's wait takes minutes).
                    pause = max(inFlight > 0 ? 0.5 : wanted / 10, wanted - idle)
                    looks = Self.soonLooks
                    continue
                }
                let first = trimmedAt == nil
                trimmedAt = now
                held = Self.privateBytes()
                if !first, let held, held - keptAfterTrim < growth, handedBack < growth { continue }
            }
            Self.trim()
            let kept = Self.privateBytes() ?? 0
            handedBack = held.map { $0 - kept } ?? 0
            keptAfterTrim = kept
            freeAfterTrim = Int(clinux_malloc_free_bytes())
            looks = 0
            pause = 1
        }
    }

    /// How many looks after a trim come every second instead of every ``quiet``.
    static let soonLooks = 8
}
