#if canImport(Glibc)
import Glibc
#endif
import Logging

/// Logs one line per event to stderr. Under systemd (JOURNAL_STREAM set) each line starts
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
