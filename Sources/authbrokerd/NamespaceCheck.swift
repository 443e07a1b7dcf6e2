#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging

/// Notices a daemon that runs in a user namespace of its own — `PrivateUsers=` or another
/// sandboxing option in a drop-in of the systemd unit — while `[[allow]]` rules exist. The
/// kernel then refuses the daemon every caller's `/proc/PID/exe`, so every rule refuses its
/// own program; saying so once beats a log of unexplained refusals (docs/systemd.md).
enum NamespaceCheck {
    /// Logs a warning when `policy` has rules and the daemon's user namespace is not its
    /// parent's (systemd --user, or the shell that started it).
    static func warnIfCallersAreHidden(_ policy: CallerPolicy, logger: Logger) {
        guard !policy.isOpen, ownsUserNamespace else { return }
        logger.warning("""
            the [[allow]] rules cannot see their callers: authbrokerd runs in a user namespace of its own \
            (PrivateUsers= or a sandboxing option in a drop-in of authbroker.service), so every rule refuses its program; \
            remove that drop-in (docs/systemd.md, "Hardening")
            """)
    }

    /// True when the daemon's user namespace differs from its parent's, or when the
    /// parent's cannot be read for the very reason that it is another namespace (EACCES).
    /// Read once, before the daemon confines itself: Landlock hides the parent's namespace
    /// too, for another reason (and the identification helper is outside the sandbox).
    static let ownsUserNamespace: Bool = {
        guard let mine = link("/proc/self/ns/user") else { return false }
        guard let parents = link("/proc/\(getppid())/ns/user") else { return errno == EACCES }
        return mine != parents
    }()

    private static func link(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
