#if canImport(Glibc)
import Glibc
#endif
import CLinux
import CWipeOnFree
import Logging

/// Keeps secrets out of core files and away from ptrace by other processes of the user.
enum Hardening {
    static func apply() {
        _ = clinux_set_nondumpable()
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
    }

    /// Freed heap memory is wiped (`wipe_on_free.c`) unless another free() came first in
    /// the process (an LD_PRELOAD allocator): then a signed-out account's refresh token may
    /// stay in freed memory, and the user is told so once at start.
    static func warnIfFreedMemoryIsKept(logger: Logger) {
        guard wipe_on_free_in_effect() == 0 else { return }
        logger.warning("""
            another free() than authbrokerd's own serves this process (LD_PRELOAD?): freed memory is not wiped, and a signed-out \
            account's refresh token may stay readable in the daemon's memory; start it without the preloaded allocator (docs/security.md)
            """)
    }
}

/// Writes to stderr without stdio's shared state.
func writeStderr(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let n = write(2, base + offset, bytes.count - offset)
            if n <= 0 { break }
            offset += n
        }
    }
}
