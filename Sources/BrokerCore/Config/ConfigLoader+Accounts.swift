import TOML

/// `default_account` and `[[providers.NAME.accounts]]` of a provider: which account a
/// request that names none gets (docs/configuration.md, "Which account").
extension TableReader {
    func accountChoice(_ t: TOMLTable, into provider: inout ProviderConfig, at key: String) throws(ConfigError) {
        if let name = try string(t, "default_account", at: key) {
            guard !name.isEmpty else { throw fail("\(key).default_account", "must name an account: its username, display name or subject") }
            provider.defaultAccount = name
        }
        guard let v = t["accounts"] else { return }
        guard let array = v.array else {
            throw fail("\(key).accounts", "must be an array of tables: write each rule as [[\(key).accounts]]")
        }
        for (i, element) in array.enumerated() {
            let at = "\(key).accounts[\(i)]"
            guard let rule = element.table else { throw fail(at, "must be a table ([[\(key).accounts]])") }
            provider.accountRules.append(try accountRule(rule, at: at))
        }
    }

    private func accountRule(_ t: TOMLTable, at key: String) throws(ConfigError) -> AccountRule {
        try checkKeys(t, allowed: ["account", "directory", "git_remote", "environment"], at: key)
        let account = try string(t, "account", at: key)
        if let account, account.isEmpty { throw fail("\(key).account", "must name an account: its username, display name or subject") }
        var conditions: [AccountRule.Condition] = []
        if let d = try string(t, "directory", at: key) {
            guard d.hasPrefix("/") || d == "~" || d.hasPrefix("~/") else {
                throw fail("\(key).directory", "must be an absolute path pattern, or start with ~/: \"~/work/**\"")
            }
            conditions.append(.directory(PathPattern(d)))
        }
        if let r = try string(t, "git_remote", at: key) {
            guard !r.isEmpty else { throw fail("\(key).git_remote", "must be a URL pattern: \"https://github.com/acme/*\"") }
            conditions.append(.gitRemote(PathPattern(r)))
        }
        if flagIsSet(t, "environment") {
            guard try flag(t, "environment", at: key) else {
                throw fail("\(key).environment", "can only be true (leave it out to ignore AUTHBROKER_ACCOUNT)")
            }
            conditions.append(.environment)
        }
        guard conditions.count == 1, let condition = conditions.first else {
            throw fail(key, "needs exactly one of directory, git_remote or environment = true")
        }
        if case .environment = condition {
            guard account == nil else {
                throw fail("\(key).account", "is not for an environment = true rule, which takes the account AUTHBROKER_ACCOUNT names")
            }
        } else if account == nil {
            throw fail("\(key).account", "is missing: name the account this rule chooses (its username, display name or subject)")
        }
        return AccountRule(account: account, condition: condition)
    }

    private func flagIsSet(_ t: TOMLTable, _ name: String) -> Bool { t[name] != nil }
}
