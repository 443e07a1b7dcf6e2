#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#endif
import BrokerClient

/// Writing to stdout and stderr, and the small formatting helpers the commands share.
///
/// Straight `write(2)` calls: unbuffered, so a line on stderr (the device code `authctl
/// login` prints before it waits) is visible at once even through a pipe, and no
/// Foundation `FileHandle`.
enum Output {
    /// Writes `text` and a newline to stdout.
    static func line(_ text: String) {
        write(text + "\n", to: STDOUT_FILENO)
    }

    /// Writes `text` and a newline to stderr.
    static func note(_ text: String) {
        write(text + "\n", to: STDERR_FILENO)
    }

    /// Writes `text` to stderr without a newline: a question the next input line answers.
    static func prompt(_ text: String) {
        write(text, to: STDERR_FILENO)
    }

    /// Writes `authctl: <sentence>` to stderr: the one line a failed command prints.
    static func error(_ sentence: String) {
        note("authctl: " + sentence)
    }

    private static func write(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return  // stdout closed or full disk: nothing better to say it on
                }
                offset += n
            }
        }
    }

    /// `value` as indented JSON with sorted keys, the form every `--json` prints; on one
    /// line with `oneLine` (a stream of objects, as `authctl events --json` prints).
    static func json<T: Encodable>(_ value: T, oneLine: Bool = false) throws(ClientError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = oneLine ? [.sortedKeys, .withoutEscapingSlashes] : [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        } catch {
            throw .badResponse("cannot print the answer as JSON: \(error)")
        }
    }

    /// `body`'s members and one more beside them: `event` on each line of
    /// `authctl login --json`, `"running": true` in `authctl status --json` (so that one
    /// member tells a script whether the daemon answered).
    struct Beside<Body: Encodable, Value: Encodable>: Encodable {
        var key: String
        var value: Value
        var body: Body

        private struct Key: CodingKey {
            let stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            try body.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(value, forKey: Key(stringValue: key))
        }
    }

    /// `text` with control characters replaced by `?`.
    ///
    /// Daemon answers carry text from the provider (error descriptions, user names, URIs);
    /// none of it may move the cursor or retitle the user's terminal.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            scalars.append(isControl(scalar) ? "?" : scalar)
        }
        return String(scalars)
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Rows as columns padded to the widest cell, two spaces apart, indented by `indent`.
    static func table(_ rows: [[String]], indent: String = "") -> [String] {
        var widths: [Int] = []
        for row in rows {
            for (column, cell) in row.enumerated() {
                if column == widths.count { widths.append(0) }
                widths[column] = max(widths[column], cell.count)
            }
        }
        return rows.map { row in
            var line = indent
            for (column, cell) in row.enumerated() {
                line += cell
                if column < row.count - 1 {
                    line += String(repeating: " ", count: widths[column] - cell.count + 2)
                }
            }
            return line
        }
    }
}

/// Time as the commands show it: Unix seconds from the daemon, local time for people.
enum TimeText {
    /// The current Unix time in seconds.
    static var now: Int64 {
        Int64(time(nil))
    }

    /// "in 3540s (at 14:05:12)" or "expired 12s ago (at 13:04:00)".
    static func expiry(_ expiresAt: Int64, now: Int64 = TimeText.now) -> String {
        let left = expiresAt - now
        let at = localTime(expiresAt, sameDayAs: now)
        return left > 0 ? "in \(left)s (at \(at))" : "expired \(-left)s ago (at \(at))"
    }

    /// "2h 03m 10s", "4m 02s", "12s".
    static func duration(seconds: Int64) -> String {
        let s = max(0, seconds)
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        if h > 0 { return "\(h)h \(two(m))m \(two(sec))s" }
        if m > 0 { return "\(m)m \(two(sec))s" }
        return "\(sec)s"
    }

    /// `HH:MM:SS` in local time, with the date in front when it is not today.
    static func localTime(_ unix: Int64, sameDayAs now: Int64) -> String {
        guard let then = brokenDown(unix), let today = brokenDown(now) else { return "\(unix)" }
        let sameDay = then.tm_year == today.tm_year && then.tm_yday == today.tm_yday
        return format(then, sameDay ? "%H:%M:%S" : "%Y-%m-%d %H:%M:%S")
    }

    private static func brokenDown(_ unix: Int64) -> tm? {
        var seconds = time_t(unix)
        var result = tm()
        return localtime_r(&seconds, &result) == nil ? nil : result
    }

    private static func format(_ value: tm, _ pattern: String) -> String {
        var value = value
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            guard let base = buffer.baseAddress else { return "" }
            let n = strftime(base, buffer.count, pattern, &value)
            return String(decoding: UnsafeRawBufferPointer(start: base, count: n), as: UTF8.self)
        }
    }
}
