#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Tells a thread of the daemon's own (`MemoryTrim`'s) to end, and lets it sleep until then:
/// an eventfd it waits on with a time-out, so that stopping does not wait out its sleep.
final class StopSignal: Sendable {
    private let fd: CInt

    /// nil when no eventfd can be made (out of descriptors).
    init?() {
        fd = eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { return nil }
    }

    deinit {
        close(fd)
    }

    /// Asks the thread to end; it wakes at once if it sleeps.
    func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    /// Sleeps for `seconds`, or less when signalled; returns whether the thread is to end.
    func wait(seconds: Double) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = CInt(max(0, min(seconds * 1000, Double(Int32.max))))
        var n: CInt
        repeat {
            n = poll(&entry, 1, ms)
        } while n < 0 && errno == EINTR
        return n > 0
    }
}
