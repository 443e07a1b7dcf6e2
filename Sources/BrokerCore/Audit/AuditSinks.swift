#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol
import Logging
import Synchronization

/// The audit trail in the journal: under systemd the daemon's stderr is the journal's
/// stream (`JOURNAL_STREAM`), so each line goes there with the `<5>` (notice) priority
/// journald reads, whatever `--log-level` says. `journalctl --user -u authbroker.service
/// -o cat` shows it; `authctl audit` reads it so.
public struct JournalAuditSink: AuditSink {
    public init() {}

    public func write(_ line: String) {
        var text = "<5>" + line + "\n"
        text.withUTF8 { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(2, bytes.baseAddress! + done, bytes.count - done)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { return }
                done += n
            }
        }
    }
}

/// The audit trail in a file of its own (`AuditLog.path`), where the daemon does not run
/// under systemd: made 0600 in a 0700 folder, each line appended with one `write(2)`,
/// and rotated to `audit.log.1` (one generation kept) once it would pass `maxBytes`, so
/// that it never holds more than twice that. Opened on the first line, not at start.
public final class AuditFileSink: AuditSink {
    private struct State {
        var fd: CInt = -1
        var size = 0
        /// Whether the last failure was logged (once, until a write works again).
        var failing = false
    }

    public let path: String
    private let maxBytes: Int
    private let logger: Logger
    private let state = Mutex(State())

    public init(path: String, maxBytes: Int = AuditLog.maxBytes, logger: Logger) {
        self.path = path
        self.maxBytes = maxBytes
        self.logger = logger
    }

    deinit {
        state.withLock { if $0.fd >= 0 { close($0.fd) } }
    }

    /// The folder the file goes in, made (0700) with its missing parents; nil when it
    /// cannot be.
    @discardableResult
    public static func makeFolder(for path: String) -> String? {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return nil }
        let folder = String(path[..<slash])
        var partial = ""
        for part in folder.split(separator: "/") {
            partial += "/" + part
            if mkdir(partial, 0o700) != 0, errno != EEXIST { return nil }
        }
        return folder
    }

    public func write(_ line: String) {
        var text = line + "\n"
        state.withLock { s in
            if s.fd >= 0, s.size + text.utf8.count > maxBytes {
                close(s.fd)
                s.fd = -1
                _ = rename(path, AuditLog.previous(of: path))
            }
            if s.fd < 0 {
                Self.makeFolder(for: path)
                // Never through a link someone left in its place.
                s.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                guard s.fd >= 0 else { return failed(&s, "cannot open it") }
                var st = stat()
                s.size = fstat(s.fd, &st) == 0 ? Int(st.st_size) : 0
                if s.size + text.utf8.count > maxBytes, s.size > 0 {
                    close(s.fd)
                    s.fd = -1
                    _ = rename(path, AuditLog.previous(of: path))
                    s.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                    guard s.fd >= 0 else { return failed(&s, "cannot open it") }
                    s.size = 0
                }
            }
            let written = text.withUTF8 { Glibc.write(s.fd, $0.baseAddress, $0.count) }
            guard written == text.utf8.count else { return failed(&s, "cannot write to it") }
            s.size += written
            s.failing = false
        }
    }

    private func failed(_ s: inout State, _ what: String) {
        let error = String(cString: strerror(errno))
        guard !s.failing else { return }
        s.failing = true
        logger.warning("the audit trail is not being written: \(what) (\(error)); decisions go on being made", metadata: ["file": "\(path)"])
    }
}

/// Lines kept in memory (tests).
public final class AuditMemorySink: AuditSink {
    private let kept = Mutex<[String]>([])

    public init() {}

    public func write(_ line: String) { kept.withLock { $0.append(line) } }

    public var lines: [String] { kept.withLock { $0 } }

    /// The lines read back.
    public var records: [AuditRecord] { lines.compactMap { AuditRecord(line: Substring($0)) } }
}
