import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// A thread of the daemon's own that lives as long as it (the memory trim, the network
/// watch): detached, named for `top` and the journal, with a small stack — its buffers are
/// on the heap. Not a task: one that sleeps or blocks on Swift's concurrency pool keeps a
/// pool thread alive (`MemoryTrim.start`).
enum DaemonThread {
    private final class Work {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static let stackSize = 64 << 10

    /// Starts `body` on a new thread called `name` (at most 15 bytes); false when none could be made.
    static func start(_ name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        guard pthread_attr_init(&attributes) == 0 else { return false }
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, stackSize)
        let work = Unmanaged.passRetained(Work {
            clinux_name_thread(name)
            body()
        }).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { argument in
            guard let argument else { return nil }
            Unmanaged<Work>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        }, work)
        guard status == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            return false
        }
        return true
    }
}
