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
/// start-up, then once nothing has happened for a few seconds; never on the path of a request.
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

    /// Trims after start-up, and after refreshes and requests that grew the heap, when quiet,
    /// until cancelled.
    func run() async {
        // nil: start-up's pages are handed back once it has been quiet for the first time.
        var trimmedAt: (refreshes: Int, activity: UInt64)?
        // Private memory right after the last trim, and what that trim handed back.
        var keptAfterTrim = 0
        var handedBack = 0
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
            let first = trimmedAt == nil
            trimmedAt = now
            let held = Self.privateBytes()
            if !first, let held, held - keptAfterTrim < growth, handedBack < growth { continue }
            Self.trim()
            let kept = Self.privateBytes() ?? 0
            handedBack = held.map { $0 - kept } ?? 0
            keptAfterTrim = kept
        }
    }
}
