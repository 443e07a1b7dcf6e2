#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Logging

/// What the front door keeps for refusing connections: a descriptor held in reserve: when
/// the process runs out, it is given up for the one `accept` that takes a queued caller,
/// who hears why it is refused (the refusals are logged in the server's `RefusalLog`, one
/// line per interval with a count, however many there are). Used on the front door's
/// thread only.
final class AcceptRefusals {
    private var spare: CInt
    private var lastAcceptError: UInt64 = 0

    init() {
        spare = eventfd(0, CInt(EFD_CLOEXEC))
    }

    deinit {
        if spare >= 0 { Glibc.close(spare) }
    }

    var hasSpare: Bool { spare >= 0 }

    /// Runs `body` with the spare descriptor closed, then takes it back.
    func withSpareGivenUp(_ body: () -> Void) {
        Glibc.close(spare)
        body()
        spare = eventfd(0, CInt(EFD_CLOEXEC))
    }

    /// `accept` failed for want of descriptors or memory: logged at most every ten seconds.
    func acceptFailed(_ error: CInt, logger: Logger) {
        let now = ServerActivity.monotonicNanoseconds()
        guard now &- lastAcceptError > 10_000_000_000 else { return }
        lastAcceptError = now
        logger.error("cannot accept connections", metadata: ["error": "\(String(cString: strerror(error)))"])
    }
}
