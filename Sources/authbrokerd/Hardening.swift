#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Keeps secrets out of core files and away from ptrace by other processes of the user.
enum Hardening {
    static func apply() {
        _ = clinux_set_nondumpable()
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
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
