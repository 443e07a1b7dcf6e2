#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerProtocol

/// `authctl audit`: the audit trail read back (docs/security.md, "The audit trail"): which
/// program got (or was refused) which token, and why.
struct Audit: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show which program was served or refused which token, and why (the audit trail).",
        discussion: """
            authbrokerd writes one entry per decision on a token (served from memory, \
            refreshed, exchanged, refused by the [[allow]] rules, confirmed, leased, \
            denied) with the program's executable and pid, the provider, account, \
            resource and audience, never a token; at most 30 entries a minute per program, \
            then one entry with the count. Under systemd they are in the journal \
            (journalctl --user -u authbroker.service); otherwise in \
            $XDG_STATE_HOME/authbroker/audit.log (~/.local/state/authbroker/audit.log), \
            rotated at 1 MiB. Both are read. It is for looking back; it does not stop a \
            program of yours that means to hide (docs/security.md).
            """
    )

    @Option(help: ArgumentHelp("Only entries this recent: seconds, or a number with s, m, h or d (15m, 2h, 1d).", valueName: "duration"))
    var since: String?

    @Option(help: ArgumentHelp("Only entries of this program: an executable's path, or its file name.", valueName: "path"))
    var program: String?

    @Flag(help: "Print the entries as JSON: {\"entries\": [...]}, each with the members of docs/cli-json.md.")
    var json = false

    func validate() throws {
        if let since, Self.seconds(since) == nil {
            throw ValidationError("--since takes seconds or a number with s, m, h or d, such as 15m or 2h")
        }
    }

    func run() throws {
        let now = Double(time(nil))
        let after = since.flatMap(Self.seconds).map { now - Double($0) }
        var entries = Self.read(after: after)
        if let program {
            entries = entries.filter { entry in
                guard let path = entry.program else { return false }
                return program.contains("/") ? path == program : path.split(separator: "/").last.map(String.init) == program
            }
        }
        if json {
            Output.line(try Output.json(Entries(entries: entries)))
            return
        }
        for line in Self.table(entries) { Output.line(line) }
    }

    struct Entries: Encodable {
        var entries: [AuditRecord]
    }

    /// The entries of the file (its rotated generation first) and the journal, oldest first.
    static func read(after: Double?) -> [AuditRecord] {
        let env: (String) -> String? = { getenv($0).map { String(cString: $0) } }
        let path = AuditLog.path(environment: env)
        var entries: [AuditRecord] = []
        for file in [AuditLog.previous(of: path), path] {
            entries += lines(ofFile: file).compactMap { AuditRecord(line: $0) }
        }
        entries += journal(after: after).compactMap { AuditRecord(line: $0) }
        if let after { entries = entries.filter { $0.time >= after } }
        return entries.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// The lines of a file; none when it cannot be read.
    static func lines(ofFile path: String) -> [Substring] {
        guard let file = fopen(path, "r") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n")
    }

    /// The daemon's lines in the user's journal (`journalctl --user -u authbroker.service
    /// -o cat`); none where there is no journal or no journalctl.
    static func journal(after: Double?) -> [Substring] {
        guard access("/usr/bin/journalctl", X_OK) == 0 || access("/bin/journalctl", X_OK) == 0 else { return [] }
        let since = after.map { " --since=@\(Int64($0))" } ?? ""
        guard let pipe = popen("journalctl --user -u authbroker.service -o cat --no-pager -q\(since) 2>/dev/null", "r") else { return [] }
        defer { pclose(pipe) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, pipe)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix(AuditRecord.prefix) }
    }

    /// `--since`'s seconds: `90`, `90s`, `15m`, `2h`, `1d`.
    static func seconds(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit = 1
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n >= 0,
              !n.multipliedReportingOverflow(by: unit).overflow else { return nil }
        return n * unit
    }

    /// The entries as a table, in local time.
    static func table(_ entries: [AuditRecord], now: Int64 = TimeText.now) -> [String] {
        guard !entries.isEmpty else { return ["No entries."] }
        let rows = entries.map { e -> [String] in
            let program = (e.program ?? (e.pid.map { "pid \($0)" } ?? "all programs")) + (e.forwarded == true ? " (forwarded)" : "")
            let what: String
            if e.decision == "more" {
                what = "and \(e.count ?? 0) more entries, not written one by one"
            } else {
                what = [e.resource ?? (e.provider == nil ? nil : "the default audience"), e.audience].compactMap { $0 }.joined(separator: " and ")
            }
            let why = [e.grant, e.lease.map { "lease \($0)" }, e.seconds.map { "\($0) s" }].compactMap { $0 }.joined(separator: ", ")
            return [TimeText.localTime(Int64(e.time), sameDayAs: now), program, e.pid.map(String.init) ?? "-", e.decision,
                    why.isEmpty ? "-" : why, e.provider ?? "-", e.account ?? "-", what.isEmpty ? "-" : what].map(Output.safe)
        }
        return Output.table([["TIME", "PROGRAM", "PID", "DECISION", "WHY", "PROVIDER", "ACCOUNT", "TOKEN FOR"]] + rows)
    }
}
