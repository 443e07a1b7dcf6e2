#if canImport(Glibc)
import Glibc
#endif
import Logging

/// Logs one line per event to stderr. Under systemd (stderr is JOURNAL_STREAM) each line starts
/// with the `<N>` syslog priority journald reads; on a terminal it reads as plain text.
struct StderrLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    let label: String
    let journal: Bool

    init(label: String, level: Logger.Level, journal: Bool) {
        self.label = label
        self.logLevel = level
        self.journal = journal
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let prefix = journal ? "<\(Self.priority(event.level))>" : "authbrokerd[\(event.level)]: "
        let line = prefix + "\(event.message)" + (fields.isEmpty ? "" : " " + fields) + "\n"
        writeStderr(line)
    }

    /// True when stderr is the journal stream systemd announced in `JOURNAL_STREAM`
    /// (`DEVICE:INODE` of the stream), not merely inherited from a parent that had one.
    static func stderrIsJournal(_ journalStream: String?) -> Bool {
        guard let journalStream else { return false }
        let parts = journalStream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// syslog(3) priorities.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }
}
