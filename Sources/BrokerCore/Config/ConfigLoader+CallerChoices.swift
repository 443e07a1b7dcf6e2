import OAuth
import TOML

/// The keys that bound what callers choose besides the resource: `scope_sets`,
/// `any_scopes`, `caller_params` and `max_tokens_per_account` of a provider, `scopes` and
/// `params` of an `[[allow]]` rule (docs/configuration.md).
extension TableReader {
    func callerChoices(_ t: TOMLTable, into provider: inout ProviderConfig, at key: String) throws(ConfigError) {
        if t["scope_sets"] != nil {
            provider.scopeSets = try scopeSets(t, "scope_sets", at: key)
        }
        provider.anyScopes = try optionalFlag(t, "any_scopes", at: key) ?? provider.anyScopes
        if let names = try strings(t, "caller_params", at: key) {
            let reserved = TokenRequestParameters.reserved(in: names)
            guard reserved.isEmpty else {
                throw fail("\(key).caller_params", "\(reserved.joined(separator: ", ")) cannot be set by callers: authbroker sets it itself")
            }
            provider.callerParams = names
        }
        provider.maxTokensPerAccount = try int(t, "max_tokens_per_account", at: key, range: 1...100_000, unit: "a whole number")
            ?? provider.maxTokensPerAccount
    }

    /// `scopes` of a rule: `"*"`, or scope sets as `scope_sets` has them; none by default.
    func ruleScopes(_ t: TOMLTable, at key: String) throws(ConfigError) -> ScopeGrant {
        guard let v = t["scopes"] else { return .sets([]) }
        if v.string == "*" { return .any }
        return .sets(try scopeSets(t, "scopes", at: key))
    }

    /// `params` of a rule: names, or `["*"]` for any the provider lets callers set.
    func ruleParams(_ t: TOMLTable, at key: String) throws(ConfigError) -> [String] {
        try strings(t, "params", at: key) ?? []
    }

    /// An array of scope sets, each an array of strings: `[["read"], ["read", "write"]]`.
    private func scopeSets(_ t: TOMLTable, _ name: String, at key: String) throws(ConfigError) -> [[String]] {
        let problem = "must be an array of scope sets, each an array of strings: [[\"read\"], [\"read\", \"write\"]]"
        guard let array = t[name]?.array else { throw fail("\(key).\(name)", problem) }
        var sets: [[String]] = []
        for element in array {
            guard let inner = element.array else { throw fail("\(key).\(name)", problem) }
            var set: [String] = []
            for scope in inner {
                guard let s = scope.string, !s.isEmpty, !s.contains(" ") else { throw fail("\(key).\(name)", problem + " (one scope per string)") }
                set.append(s)
            }
            sets.append(CacheKey.normalized(set))
        }
        return sets
    }
}
