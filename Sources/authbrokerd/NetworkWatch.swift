import CLinux
import HTTPClient

#if canImport(Glibc)
import Glibc
#endif

/// Watches this computer's network from one thread blocked on a NETLINK_ROUTE socket
/// (`clinux_route_watch_*`): it wakes only when the kernel reports a change (a link up or
/// down, an address or route added or removed), never on a request, never on a timer.
///
/// What it sees of the links goes to `HostNetwork`, so that a request to a provider whose
/// link is down fails at once with the reason; when something may have brought a network
/// back (a link came up or got a carrier, an address or route was added), `changed` runs,
/// which ends the back-offs of providers that could not be reached
/// (`ProvidersService.networkChanged`).
///
/// A thread of its own, not a task: a task waiting on the socket would keep a thread of
/// Swift's concurrency pool alive (`MemoryTrim.start`). Started after the daemon is
/// confined (Landlock wants one thread; it does not restrict sockets). Where a system-call
/// filter refuses AF_NETLINK (a unit without it in `RestrictAddressFamilies`) there is no
/// watch: requests then wait for their deadline, back-offs run out, and `start` says why.
enum NetworkWatch {
    /// Starts the watch; nil, or the sentence saying why there is none.
    static func start(changed: @escaping @Sendable () -> Void) -> String? {
        let fd = clinux_route_watch_open()
        guard fd >= 0 else {
            return "cannot watch this computer's network (a NETLINK_ROUTE socket was refused: \(String(cString: strerror(-fd)))), so a provider that cannot be reached while offline is tried again only when its back-off ends; allow AF_NETLINK (RestrictAddressFamilies in the unit)"
        }
        guard clinux_route_watch_ask_links(fd) == 0 else {
            close(fd)
            return "cannot watch this computer's network: the kernel refused the list of links"
        }
        guard DaemonThread.start("authbroker-net", { NetworkWatch.run(fd, changed: changed) }) else {
            close(fd)
            return "cannot start the thread that watches this computer's network"
        }
        return nil
    }

    /// Reads the kernel's reports until the socket fails, for the life of the daemon.
    private static func run(_ fd: CInt, changed: @Sendable () -> Void) {
        let size: CInt = 32 << 10
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: Int(size), alignment: 8)
        defer { buffer.deallocate() }
        var indices = [CInt](repeating: 0, count: 64)
        var flags = [UInt32](repeating: 0, count: 64)
        // Every link's IFF_* flags; published once the first list of links is complete.
        var links: [CInt: UInt32] = [:]
        var listed = false
        while true {
            var news: CInt = 0
            let count = clinux_route_watch_read(fd, buffer, size, &news, &indices, &flags, CInt(indices.count))
            if count == -ENOBUFS {
                // The kernel dropped reports: ask for every link again, and take it as a change.
                _ = clinux_route_watch_ask_links(fd)
                changed()
                continue
            }
            guard count >= 0 else { break }
            var cameUp = false
            for i in 0..<Int(count) {
                let before = links[indices[i]] ?? 0
                links[indices[i]] = flags[i] == 0 ? nil : flags[i]
                if Self.usable(flags[i]), !Self.usable(before) { cameUp = true }
            }
            if news & CInt(CLINUX_ROUTE_DUMP_DONE) != 0 { listed = true }
            if listed { HostNetwork.update(HostNetwork.Links(flags: links.values)) }
            if listed, cameUp || news & CInt(CLINUX_ROUTE_GAINED) != 0 { changed() }
        }
        close(fd)
    }

    /// Up, and running unless it is `lo` (which has no carrier to lose).
    private static func usable(_ flags: UInt32) -> Bool {
        flags & UInt32(IFF_UP) != 0 && (flags & UInt32(IFF_LOOPBACK) != 0 || flags & UInt32(IFF_RUNNING) != 0)
    }
}
