#if canImport(Glibc)
import Glibc
#endif

/// One entry of the audit trail (docs/security.md, "The audit trail"): a decision on a
/// token, the program it was for (executable path, pid, forwarded or not), the provider,
/// account, resource and audience, and why it was allowed or refused. Never a token.
///
/// Written by the daemon as one line with a stable prefix and `key=value` fields
/// (logfmt), to the journal under systemd and to its own file elsewhere (``AuditLog``);
/// read back by `authctl audit`, which prints these same members with `--json`.
///
///     audit: time=2026-03-20T10:15:02.118Z decision=served method=token.get program=/usr/bin/git pid=4242 forwarded=no provider=corp account=alice resource=https://git.example.com grant=rule
public struct AuditRecord: Codable, Sendable, Equatable {
    /// Unix seconds (written as UTC, ISO 8601, to the millisecond).
    public var time: Double
    /// `served` (from memory), `refreshed`, `exchanged`, `refused` (by policy), `confirmed`
    /// (the user's "Allow once"), `leased` (the user's "Allow for N minutes"), `denied` (the
    /// user said no, closed the question, or did not answer), or `more`: `count` entries of
    /// `program` in the last minute were past the rate limit and not written one by one.
    public var decision: String
    /// The JSON-RPC method (`token.get`, `token.exchange`, `dpop.proof`).
    public var method: String?
    /// The executable of the process that asked, as the kernel names it (`/proc/PID/exe`).
    public var program: String?
    public var pid: Int32?
    /// Whether that process is OpenSSH carrying a forwarded socket: the program that asked
    /// runs at the other end.
    public var forwarded: Bool?
    public var provider: String?
    public var account: String?
    public var resource: String?
    public var audience: String?
    /// Why it was served: `open` (no `[[allow]]` rules), `rule` (a rule without `confirm`),
    /// `connection` (the user allowed it earlier on this connection), `confirmed` (the user
    /// allowed it now), `lease` (a lease the user gave, `lease` its id).
    public var grant: String?
    /// The lease's id (`authctl grants`).
    public var lease: String?
    /// A lease's length in seconds (decision `leased`).
    public var seconds: Int?
    /// Entries not written one by one (decision `more`).
    public var count: Int?
    /// A refusal's sentence (decisions `refused` and `denied`).
    public var reason: String?

    public init(time: Double, decision: String, method: String? = nil, program: String? = nil, pid: Int32? = nil,
                forwarded: Bool? = nil, provider: String? = nil, account: String? = nil, resource: String? = nil,
                audience: String? = nil, grant: String? = nil, lease: String? = nil, seconds: Int? = nil,
                count: Int? = nil, reason: String? = nil) {
        self.time = time
        self.decision = decision
        self.method = method
        self.program = program
        self.pid = pid
        self.forwarded = forwarded
        self.provider = provider
        self.account = account
        self.resource = resource
        self.audience = audience
        self.grant = grant
        self.lease = lease
        self.seconds = seconds
        self.count = count
        self.reason = reason
    }

    /// What every line starts with: `journalctl -o cat` and the file are searched for it.
    public static let prefix = "audit: "

    /// The line, without a newline: `audit: time=… decision=…` and the members that are
    /// set, in this order. Values with spaces, quotes, `=` or control characters are
    /// quoted, with `\"`, `\\`, `\n`, `\r`, `\t`, `\xHH` and `\uHHHH` inside: a path or resource
    /// that holds a newline cannot make a line of its own.
    public var line: String {
        var out = Self.prefix + "time=" + Self.timestamp(time) + " decision=" + Self.quoted(decision)
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            out += " " + key + "=" + Self.quoted(value)
        }
        add("method", method)
        add("program", program)
        add("pid", pid.map(String.init))
        add("forwarded", forwarded.map { $0 ? "yes" : "no" })
        add("provider", provider)
        add("account", account)
        add("resource", resource)
        add("audience", audience)
        add("grant", grant)
        add("lease", lease)
        add("seconds", seconds.map(String.init))
        add("count", count.map(String.init))
        add("reason", reason)
        return out
    }

    /// Reads a line `line` wrote (a journal line of the daemon's other kinds, or anything
    /// else, is nil). Unknown keys are skipped: later versions may add members.
    public init?(line: Substring) {
        guard line.hasPrefix(Self.prefix) else { return nil }
        guard let fields = Self.fields(line.dropFirst(Self.prefix.count)),
              let stamp = fields["time"], let time = Self.parseTimestamp(stamp), let decision = fields["decision"]
        else { return nil }
        self.init(time: time, decision: decision)
        method = fields["method"]
        program = fields["program"]
        pid = fields["pid"].flatMap { Int32($0) }
        forwarded = fields["forwarded"].map { $0 == "yes" }
        provider = fields["provider"]
        account = fields["account"]
        resource = fields["resource"]
        audience = fields["audience"]
        grant = fields["grant"]
        lease = fields["lease"]
        seconds = fields["seconds"].flatMap { Int($0) }
        count = fields["count"].flatMap { Int($0) }
        reason = fields["reason"]
    }

    // MARK: logfmt

    /// `value` as written: bare when it needs nothing, else in quotes with escapes.
    static func quoted(_ value: String) -> String {
        let plain = !value.isEmpty && value.unicodeScalars.allSatisfy { s in
            s.value > 0x20 && !Self.escaped(s) && s != "\"" && s != "=" && s != "\\"
        }
        if plain { return value }
        var out = "\""
        for s in value.unicodeScalars {
            switch s {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where s.value < 0x20 || Self.escaped(s):
                let hex = String(s.value, radix: 16)
                out += s.value > 0xFF ? "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    : "\\x" + (hex.count < 2 ? "0" + hex : hex)
            default: out.unicodeScalars.append(s)
            }
        }
        return out + "\""
    }

    /// Control characters past ASCII's, and the line and paragraph separators some
    /// viewers break lines at: written as `\xHH`, never as themselves.
    private static func escaped(_ s: Unicode.Scalar) -> Bool {
        s.value == 0x7F || (0x80..<0xA0).contains(s.value) || s.value == 0x2028 || s.value == 0x2029
    }

    /// The `key=value` fields of a line's rest; nil when it is not well formed.
    static func fields(_ text: Substring) -> [String: String]? {
        var fields: [String: String] = [:]
        var scalars = Array(text.unicodeScalars)[...]
        while let first = scalars.first {
            if first == " " { scalars = scalars.dropFirst(); continue }
            guard let equals = scalars.firstIndex(of: "=") else { return nil }
            let key = String(String.UnicodeScalarView(scalars[scalars.startIndex..<equals]))
            guard !key.isEmpty, !key.unicodeScalars.contains(" ") else { return nil }
            scalars = scalars[(equals + 1)...]
            var value = String.UnicodeScalarView()
            if scalars.first == "\"" {
                scalars = scalars.dropFirst()
                var closed = false
                while let s = scalars.first {
                    scalars = scalars.dropFirst()
                    if s == "\"" { closed = true; break }
                    guard s == "\\" else { value.append(s); continue }
                    guard let e = scalars.first else { return nil }
                    scalars = scalars.dropFirst()
                    switch e {
                    case "n": value.append("\n")
                    case "r": value.append("\r")
                    case "t": value.append("\t")
                    case "x", "u":
                        let digits = e == "x" ? 2 : 4
                        let hex = String(String.UnicodeScalarView(scalars.prefix(digits)))
                        guard hex.count == digits, let code = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(code) else { return nil }
                        value.append(scalar)
                        scalars = scalars.dropFirst(digits)
                    default: value.append(e)
                    }
                }
                guard closed else { return nil }
            } else {
                while let s = scalars.first, s != " " {
                    value.append(s)
                    scalars = scalars.dropFirst()
                }
            }
            fields[key] = String(value)
        }
        return fields
    }

    // MARK: time

    /// `2026-03-20T10:15:02.118Z`.
    public static func timestamp(_ time: Double) -> String {
        var seconds = time_t(time.rounded(.down))
        let millis = Int(((time - time.rounded(.down)) * 1000).rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }

    /// The Unix time of a `timestamp` (milliseconds optional); nil for anything else.
    public static func parseTimestamp(_ text: String) -> Double? {
        let u = Array(text.utf8)
        guard u.count >= 20, u.last == UInt8(ascii: "Z"), u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-"),
              u[10] == UInt8(ascii: "T"), u[13] == UInt8(ascii: ":"), u[16] == UInt8(ascii: ":") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var n: Int32 = 0
            for b in u[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) else { return nil }
                n = n * 10 + Int32(b - UInt8(ascii: "0"))
            }
            return n
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19) else { return nil }
        var fraction = 0.0
        if u.count > 20 {
            guard u[19] == UInt8(ascii: "."), u.count > 21, let digits = number(20..<(u.count - 1)) else { return nil }
            fraction = Double(digits) / pow10(u.count - 21)
        } else if u[19] != UInt8(ascii: "Z") {
            return nil
        }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Double(timegm(&parts)) + fraction
    }

    private static func pow10(_ n: Int) -> Double {
        var value = 1.0
        for _ in 0..<n { value *= 10 }
        return value
    }
}

/// Where the daemon writes its audit trail when it is not under systemd, and `authctl
/// audit` reads it: `$XDG_STATE_HOME/authbroker/audit.log`, else
/// `~/.local/state/authbroker/audit.log` (the XDG base directory for state that outlives
/// a restart but is no configuration). Rotated at `maxBytes` to `audit.log.1`, one
/// generation kept. Here rather than in BrokerCore so that authctl finds the same file.
public enum AuditLog {
    /// The size at which the file is rotated: 1 MiB, some 4 000 entries; with the one
    /// generation kept, the trail holds the last 4 000 to 8 000.
    public static let maxBytes = 1 << 20

    /// The file's path.
    public static func path(environment get: (String) -> String?) -> String {
        if let state = get("XDG_STATE_HOME"), state.hasPrefix("/") { return state + "/authbroker/audit.log" }
        return (get("HOME") ?? "") + "/.local/state/authbroker/audit.log"
    }

    /// The rotated generation beside `path`.
    public static func previous(of path: String) -> String { path + ".1" }
}
