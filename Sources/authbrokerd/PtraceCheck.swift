#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging

/// `[[allow]]` rules name programs; without Yama (`kernel.yama.ptrace_scope` 0, or no Yama
/// at all) any process of the user may ptrace such a program and take what it is given,
/// so the rules then keep out only programs that do not try. Said once at start, so the
/// user can decide (docs/security.md, "Callers").
enum PtraceCheck {
    static let scopeFile = "/proc/sys/kernel/yama/ptrace_scope"

    /// Logs a warning when `policy` has rules and ptrace between the user's processes is open.
    static func warnIfOpen(_ policy: CallerPolicy, logger: Logger, scopeFile: String = scopeFile) {
        guard !policy.isOpen, isOpen(scopeFile: scopeFile) else { return }
        logger.warning("""
            kernel.yama.ptrace_scope is 0 or Yama is absent: any process of yours can ptrace a program the [[allow]] rules serve \
            and take its tokens; set kernel.yama.ptrace_scope = 1 (sysctl) to make the rules hold against such processes (docs/security.md)
            """)
    }

    /// True when Yama is absent or its scope is 0 (classic ptrace: same user, any process).
    static func isOpen(scopeFile: String = scopeFile) -> Bool {
        guard let file = fopen(scopeFile, "r") else { return true }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 16)
        guard fgets(&line, CInt(line.count), file) != nil else { return true }
        return atoi(line) == 0
    }
}
