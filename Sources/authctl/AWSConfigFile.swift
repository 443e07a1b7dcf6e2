/// `~/.aws/config`, as text: one profile's section set, the rest of the file kept as it is
/// (comments, other profiles, the order of everything).
struct AWSConfigFile {
    var lines: [String]

    init(text: String) {
        lines = text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
    }

    var text: String { lines.isEmpty ? "" : lines.joined(separator: "\n") + "\n" }

    /// The keys that decide where a profile's credentials come from before
    /// `credential_process` (botocore's order: assume role, web identity, SSO) or beside it,
    /// and static keys, which do not belong in the config file: `set` removes them.
    static let replacedKeys: Set<String> = [
        "credential_process", "role_arn", "source_profile", "credential_source", "web_identity_token_file",
        "role_session_name", "duration_seconds", "external_id", "mfa_serial", "sso_session", "sso_start_url", "sso_region",
        "sso_account_id", "sso_role_name", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
    ]

    /// `[default]` or `[profile NAME]`, as the AWS CLI writes them to the config file.
    static func header(_ profile: String) -> String {
        profile == "default" ? "[default]" : "[profile \(profile)]"
    }

    /// The section's name of a header line (`default`, `profile dev`), or nil.
    private static func section(_ line: String) -> String? {
        let t = line.trimmingWhitespace
        guard t.hasPrefix("["), t.hasSuffix("]") else { return nil }
        return String(t.dropFirst().dropLast()).split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
    }

    /// The key of a `key = value` line at the start of the line, or nil (a comment, a
    /// blank, or an indented line of a nested setting).
    private static func key(_ line: String) -> String? {
        guard let first = line.first, first != " ", first != "\t", first != "#", first != ";",
              let eq = line.firstIndex(of: "=") else { return nil }
        return String(line[..<eq]).trimmingWhitespace
    }

    /// Sets the profile's `values` (in order), removing `replacedKeys` and the keys set;
    /// returns the keys removed that were not `credential_process` or a value set here.
    @discardableResult
    mutating func set(profile: String, _ values: [(String, String)]) -> [String] {
        let names = profile == "default" ? ["default", "profile default"] : ["profile \(profile)"]
        let setKeys = Set(values.map(\.0))
        var removed: [String] = []
        guard let start = lines.firstIndex(where: { Self.section($0).map(names.contains) ?? false }) else {
            if let last = lines.last, !last.trimmingWhitespace.isEmpty { lines.append("") }
            lines.append(Self.header(profile))
            lines += values.map { "\($0.0) = \($0.1)" }
            return []
        }
        let end = lines[(start + 1)...].firstIndex { Self.section($0) != nil } ?? lines.count
        var kept: [String] = []
        var dropping = false
        for line in lines[(start + 1)..<end] {
            if let key = Self.key(line) {
                dropping = Self.replacedKeys.contains(key) || setKeys.contains(key)
                if dropping, !setKeys.contains(key), key != "credential_process" { removed.append(key) }
            } else if line.first.map({ $0 != " " && $0 != "\t" }) ?? true {
                dropping = false  // a blank line or a comment; indented lines belong to the key above
            }
            if !dropping { kept.append(line) }
        }
        // The new values after the section's last setting, before blank lines and comments
        // that lead into the next section.
        var tail: [String] = []
        while let last = kept.last, last.trimmingWhitespace.isEmpty || last.hasPrefix("#") || last.hasPrefix(";") {
            tail.insert(kept.removeLast(), at: 0)
        }
        let section = kept + values.map { "\($0.0) = \($0.1)" } + tail
        lines.replaceSubrange((start + 1)..<end, with: section)
        return removed
    }

    /// Whether the profile has a section here (the credentials file's `[NAME]`).
    func hasCredentials(profile: String) -> Bool {
        guard let start = lines.firstIndex(where: { Self.section($0) == profile }) else { return false }
        let end = lines[(start + 1)...].firstIndex { Self.section($0) != nil } ?? lines.count
        return lines[(start + 1)..<end].contains { Self.key($0) == "aws_access_key_id" }
    }
}

extension String {
    /// Without spaces and tabs at either end.
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s.removeLast() }
        return String(s)
    }
}
