/// One `[[allow]]` rule: which callers (by executable, and optionally systemd unit or
/// cgroup) may get tokens for which resources of which providers, and whether they may read
/// the account's claims (`account.whoami`, `account.userinfo`).
public struct AllowRule: Sendable, Equatable {
    /// The caller's executable path, exactly as the kernel reports it.
    public var executable: String
    /// The systemd unit the caller must run in, when set.
    public var unit: String?
    /// A cgroup path prefix the caller's cgroup must start with, when set.
    public var cgroupPrefix: String?
    /// Resources granted; `*` grants every resource (and the default audience).
    public var resources: [String]
    /// Providers granted; empty means every provider.
    public var providers: [String]
    /// Whether ID-token claims and UserInfo may be read.
    public var claims: Bool

    public init(executable: String, unit: String? = nil, cgroupPrefix: String? = nil, resources: [String],
                providers: [String] = [], claims: Bool = false) {
        self.executable = executable
        self.unit = unit
        self.cgroupPrefix = cgroupPrefix
        self.resources = resources
        self.providers = providers
        self.claims = claims
    }

    func matches(_ caller: Caller) -> Bool {
        guard caller.executable == executable else { return false }
        if let unit, caller.unit != unit { return false }
        if let cgroupPrefix, !(caller.cgroup ?? "").hasPrefix(cgroupPrefix) { return false }
        return true
    }

    func grants(provider: String, resource: String?) -> Bool {
        guard providers.isEmpty || providers.contains(provider) else { return false }
        if resources.contains("*") { return true }
        guard let resource else { return false }
        return resources.contains(resource)
    }
}

/// The caller policy. With no rules, every process of the user may have every token; with
/// rules, a caller gets only what some rule grants it. Management (sign-in, sign-out,
/// status, listing) is never restricted: it reveals no token.
public struct CallerPolicy: Sendable, Equatable {
    public var rules: [AllowRule]

    public init(rules: [AllowRule] = []) { self.rules = rules }

    public var isOpen: Bool { rules.isEmpty }

    /// Whether `caller` may have a token for `resource` of `provider`.
    public func allowsToken(_ caller: Caller?, provider: String, resource: String?) -> Bool {
        if rules.isEmpty { return true }
        guard let caller else { return false }
        return rules.contains { $0.matches(caller) && $0.grants(provider: provider, resource: resource) }
    }

    /// Whether `caller` may read the claims of accounts of `provider`.
    public func allowsClaims(_ caller: Caller?, provider: String) -> Bool {
        if rules.isEmpty { return true }
        guard let caller else { return false }
        return rules.contains { $0.matches(caller) && $0.claims && ($0.providers.isEmpty || $0.providers.contains(provider)) }
    }
}
