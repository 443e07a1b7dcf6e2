import Glibc

/// Runs one request's blocking work on a thread of its own, off Swift's cooperative
/// pool. SIGPIPE is blocked on that thread: OpenSSL writes to the socket with write(2),
/// and a peer that hangs up must become an error, not a signal that ends the process.
enum WorkerThread {
    private final class Work {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// The stack each request thread gets: OpenSSL's handshake needs tens of KiB.
    static let stackSize = 512 * 1024

    /// Starts `body` on a new detached thread; false when no thread could be made.
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        var attributes = pthread_attr_t()
        guard pthread_attr_init(&attributes) == 0 else { return false }
        defer { pthread_attr_destroy(&attributes) }
        _ = pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        _ = pthread_attr_setstacksize(&attributes, stackSize)
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, &attributes, { argument in
            guard let argument else { return nil }
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            Unmanaged<Work>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        }, work)
        if status != 0 {
            Unmanaged<Work>.fromOpaque(work).release()
            return false
        }
        return true
    }
}
