#if canImport(Glibc)
import Glibc
#endif
import BrokerCrypto
import BrokerProtocol
import OAuth
import TOML

/// Reads and checks config.toml. Unknown keys are errors, so a typo never silently
/// drops a setting.
public enum ConfigLoader {
    /// The path the daemon reads when neither `--config` nor `AUTHBROKER_CONFIG` is given:
    /// `$XDG_CONFIG_HOME/authbroker/config.toml`, else `~/.config/authbroker/config.toml`.
    public static func defaultPath(environment get: (String) -> String?) -> String {
        ConfigPath.resolve(environment: get)
    }

    public static func load(path: String) throws(ConfigError) -> BrokerConfig {
        let bytes: [UInt8]
        switch readFile(path) {
        case .bytes(let read):
            bytes = read
        case .failed(let code) where code == EISDIR:
            throw ConfigError(file: path, key: nil, problem: "is a folder, not a file: give the path of config.toml itself, see docs/configuration.md")
        case .failed(let code) where code == ENOENT:
            throw ConfigError(file: path, key: nil, problem: "cannot be read (\(String(cString: strerror(code)))): create it, see docs/configuration.md")
        case .failed(let code):
            throw ConfigError(file: path, key: nil, problem: "cannot be read (\(String(cString: strerror(code)))): check the file and its permissions, see docs/configuration.md",
                              systemError: code)
        case .tooLarge:
            throw ConfigError(file: path, key: nil, problem: "is larger than \(maxFileSize >> 20) MiB, far more than any configuration needs: check that it is the right file")
        }
        let root: TOMLTable
        do throws(TOMLError) {
            root = try TOMLTable(parsingUTF8: bytes)
        } catch {
            throw ConfigError(file: path, key: nil, problem: error.description)
        }
        return try build(root, file: path)
    }

    public static func parse(_ text: String, file: String) throws(ConfigError) -> BrokerConfig {
        let root: TOMLTable
        do throws(TOMLError) {
            root = try TOMLTable(parsing: text)
        } catch {
            // "line 4, column 12: a string is not closed: …"; never the value's text.
            throw ConfigError(file: file, key: nil, problem: error.description)
        }
        return try build(root, file: file)
    }

    /// The configuration a parsed file holds, checked key by key.
    private static func build(_ root: TOMLTable, file: String) throws(ConfigError) -> BrokerConfig {
        let reader = TableReader(file: file)
        try reader.checkKeys(root, allowed: ["daemon", "providers", "allow", "discovery", "aws"], at: nil)
        let discovery = try reader.discovery(root)

        let daemon = try reader.daemon(root)

        var providers: [ProviderConfig] = []
        if let table = try reader.table(root, "providers", at: nil) {
            for name in table.keys.sorted() {
                // `[providers.""]` is valid TOML: its key is shown quoted, as it is written.
                let key = name.isEmpty ? "providers.\"\"" : "providers.\(name)"
                guard let p = table[name]?.table else {
                    throw ConfigError(file: file, key: key, problem: "must be a table ([\(key)])")
                }
                providers.append(try reader.provider(p, name: name, at: key))
            }
        }
        if let d = daemon.defaultProvider, !providers.contains(where: { $0.name == d }) {
            throw ConfigError(file: file, key: "daemon.default_provider", problem: "names \"\(d)\", which is not a configured provider")
        }
        // With discovery, a file may configure no provider at all: resources lead to theirs.
        if providers.isEmpty && discovery.mode == .off {
            throw ConfigError(file: file, key: "providers", problem: "no provider is configured and [discovery] mode = \"off\": add a [providers.NAME] table with issuer and client_id, or let resources name theirs (mode = \"ask\")")
        }
        var rules: [AllowRule] = []
        if let allow = root["allow"] {
            guard let array = allow.array else {
                throw ConfigError(file: file, key: "allow", problem: "must be an array of tables: write each rule as [[allow]]")
            }
            for (i, element) in array.enumerated() {
                guard let t = element.table else {
                    throw ConfigError(file: file, key: "allow[\(i)]", problem: "must be a table ([[allow]])")
                }
                rules.append(try reader.rule(t, at: "allow[\(i)]", providers: Set(providers.map(\.name))))
            }
        }
        var config = BrokerConfig(daemon: daemon, providers: providers, policy: CallerPolicy(rules: rules), discovery: discovery)
        config.aws = try reader.aws(root)
        return config
    }

    /// The largest file read: a configuration is a few KiB.
    static let maxFileSize = 1 << 20

    enum FileRead {
        case bytes([UInt8])
        /// `errno` of the open or the read.
        case failed(Int32)
        case tooLarge
    }

    /// The file's bytes, or why not: a folder opens (fopen takes it) and fails only at the
    /// read, with EISDIR, so a read error is checked rather than taken for the end.
    private static func readFile(_ path: String) -> FileRead {
        guard let f = fopen(path, "r") else { return .failed(errno) }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n > 0 { bytes.append(contentsOf: buffer[0..<n]) }
            if bytes.count > maxFileSize { return .tooLarge }
            if n < buffer.count {
                if ferror(f) != 0 { return .failed(errno) }
                break
            }
        }
        return .bytes(bytes)
    }
}

/// Typed access to TOML values that turns every mismatch into a ConfigError naming the key.
struct TableReader {
    let file: String

    func fail(_ key: String, _ problem: String) -> ConfigError {
        ConfigError(file: file, key: key, problem: problem)
    }

    func path(_ parent: String?, _ key: String) -> String {
        parent.map { "\($0).\(key)" } ?? key
    }

    func checkKeys(_ table: TOMLTable, allowed: Set<String>, at parent: String?) throws(ConfigError) {
        for key in table.keys where !allowed.contains(key) {
            let known = allowed.sorted().joined(separator: ", ")
            let guess = Self.nearest(to: key, in: allowed).map { ": did you mean \($0)?" } ?? ""
            throw fail(path(parent, key), "unknown key\(guess) (known here: \(known))")
        }
    }

    /// The known key a mistyped one most likely meant: the nearest by edit distance
    /// (Levenshtein: letters added, dropped or changed), when it is at most 2 edits away
    /// (`refresh_margn` → `refresh_margin`, `client-id` → `client_id`); the first in
    /// sorted order among equally near ones; nil when none is that near.
    static func nearest(to key: String, in known: Set<String>) -> String? {
        let typed = Array(key.lowercased().utf8)
        var best: (name: String, distance: Int)?
        for name in known.sorted() {
            let candidate = Array(name.utf8)
            guard abs(candidate.count - typed.count) <= 2 else { continue }
            let d = editDistance(typed, candidate)
            if d <= 2, d < (best?.distance ?? .max) { best = (name, d) }
        }
        return best?.name
    }

    /// Levenshtein distance, two rows at a time.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    func table(_ t: TOMLTable, _ key: String, at parent: String?) throws(ConfigError) -> TOMLTable? {
        guard let v = t[key] else { return nil }
        guard let table = v.table else { throw fail(path(parent, key), "must be a table") }
        return table
    }

    func string(_ t: TOMLTable, _ key: String, at parent: String?) throws(ConfigError) -> String? {
        guard let v = t[key] else { return nil }
        guard let s = v.string else { throw fail(path(parent, key), "must be a string") }
        return s
    }

    func int(_ t: TOMLTable, _ key: String, at parent: String?, range: ClosedRange<Int>,
             unit: String = "a whole number of seconds") throws(ConfigError) -> Int? {
        guard let v = t[key] else { return nil }
        guard let i = v.int else { throw fail(path(parent, key), "must be \(unit)") }
        guard range.contains(i) else {
            throw fail(path(parent, key), "must be between \(range.lowerBound) and \(range.upperBound), not \(i)")
        }
        return i
    }

    func strings(_ t: TOMLTable, _ key: String, at parent: String?) throws(ConfigError) -> [String]? {
        guard let v = t[key] else { return nil }
        guard let array = v.array else { throw fail(path(parent, key), "must be an array of strings") }
        var result: [String] = []
        for element in array {
            guard let s = element.string else { throw fail(path(parent, key), "must be an array of strings") }
            result.append(s)
        }
        return result
    }

    /// `dpop = true` (ES256), `false`, or an algorithm name.
    func dpop(_ t: TOMLTable, at key: String) throws(ConfigError) -> JWSAlgorithm? {
        guard let v = t["dpop"] else { return nil }
        if let b = v.bool { return b ? .es256 : nil }
        let names = SigningKey.algorithms.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
        guard let s = v.string, let algorithm = JWSAlgorithm(rawValue: s), SigningKey.algorithms.contains(algorithm) else {
            throw fail("\(key).dpop", "must be true, false or one of \(names)")
        }
        return algorithm
    }

    func rule(_ t: TOMLTable, at key: String, providers known: Set<String>) throws(ConfigError) -> AllowRule {
        try checkKeys(t, allowed: ["exe", "forwarded", "confirm", "confirm_for", "namespaces", "unit", "cgroup", "resources", "providers", "claims",
                                   "scopes", "params"], at: key)
        let forwarded = try flag(t, "forwarded", at: key)
        let exe = try string(t, "exe", at: key)
        if forwarded {
            // The caller of a forwarded socket is OpenSSH, whatever runs at the other end:
            // naming an executable as well would say something the daemon cannot check.
            guard exe == nil else {
                throw fail("\(key).exe", "cannot be given with forwarded = true: a forwarded caller is the ssh program that carries the connection, never the remote program; write two rules")
            }
        } else if exe.map({ !$0.hasPrefix("/") }) ?? true {
            throw fail("\(key).exe", "is missing or not an absolute path: name the caller's executable, e.g. \"/usr/bin/git\" (or write forwarded = true for callers over an ssh-forwarded socket)")
        }
        let providers = try strings(t, "providers", at: key) ?? []
        for p in providers where !known.contains(p) {
            throw fail("\(key).providers", "names \"\(p)\", which is not a configured provider")
        }
        let claims = try flag(t, "claims", at: key)
        var namespaces = NamespaceScope.user
        if let v = try string(t, "namespaces", at: key) {
            guard let scope = NamespaceScope(rawValue: v) else {
                throw fail("\(key).namespaces", "must be \"user\" (the default: only callers in the user's own namespaces) or \"any\"")
            }
            namespaces = scope
        }
        let confirm = try flag(t, "confirm", at: key)
        let confirmFor = try leaseLength(t, at: key)
        if confirmFor != nil, !confirm {
            throw fail("\(key).confirm_for", "is the longest lease the user may give in answer to the rule's question, so it needs confirm = true in the same rule")
        }
        return AllowRule(executable: exe ?? "", forwarded: forwarded, confirm: confirm, confirmFor: confirmFor, namespaces: namespaces, unit: try string(t, "unit", at: key), cgroupPrefix: try string(t, "cgroup", at: key),
                         resources: try strings(t, "resources", at: key) ?? [], providers: providers, claims: claims,
                         scopes: try ruleScopes(t, at: key), params: try ruleParams(t, at: key))
    }

    /// The range of `confirm_for`, seconds: from 10 s to a day.
    static let leaseRange = 10...86400

    /// `confirm_for`: seconds, or a string of a number and a unit (`"90s"`, `"15m"`, `"8h"`);
    /// nil when absent.
    func leaseLength(_ t: TOMLTable, at key: String) throws(ConfigError) -> Int? {
        guard let v = t["confirm_for"] else { return nil }
        let range = Self.leaseRange
        let problem = "must be seconds (\(range.lowerBound) to \(range.upperBound)) or a length such as \"15m\", \"90s\" or \"8h\""
        var seconds: Int?
        if let n = v.int {
            seconds = Int(exactly: n)
        } else if let text = v.string, let unit = text.last, let n = Int(text.dropLast()), n >= 0 {
            switch unit {
            case "s": seconds = n
            case "m": seconds = n.multipliedReportingOverflow(by: 60).overflow ? nil : n * 60
            case "h": seconds = n.multipliedReportingOverflow(by: 3600).overflow ? nil : n * 3600
            default: seconds = nil
            }
        }
        guard let seconds, range.contains(seconds) else { throw fail("\(key).confirm_for", problem) }
        return seconds
    }

    /// A true-or-false key, false when absent.
    func flag(_ t: TOMLTable, _ name: String, at key: String) throws(ConfigError) -> Bool {
        try optionalFlag(t, name, at: key) ?? false
    }
}
