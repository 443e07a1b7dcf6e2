/// Whether a rule also serves callers in other mount or user namespaces (`namespaces`).
public enum NamespaceScope: String, Sendable, Equatable {
    /// Only callers in the namespaces the daemon was started in (the default): inside a
    /// namespace of its own, a process of the user can mount anything over any path.
    case user
    /// Callers in any namespace (containers, sandboxes) whose executable is the same file.
    case any
}

/// One `[[allow]]` rule: which callers (by executable, and optionally systemd unit or
/// cgroup) may get tokens for which resources of which providers, and whether they may read
/// the account's claims (`account.whoami`, `account.userinfo`).
public struct AllowRule: Sendable, Equatable {
    /// The executable's path as configured. The caller matches when it runs this very file
    /// (same device, inode and inode birth: `FileID`), whatever path it was started by. The
    /// path is stat'ed on every decision, so a package upgrade that renames a new file over
    /// it is followed at once, and the inode number it freed names nothing.
    public var executable: String
    /// Whether the rule is for callers over an ssh-forwarded socket (`forwarded = true`):
    /// it matches a caller that is one of OpenSSH's programs (``Forwarders``), instead of an
    /// executable of its own.
    public var forwarded: Bool
    /// Whether the user is asked, through the desktop notification, before a caller this
    /// rule grants gets a token (`confirm = true`).
    public var confirm: Bool
    /// The longest lease the user may give in answer to this rule's question, in seconds
    /// (`confirm_for`): "Allow for N minutes" beside "Allow once" and "Deny". nil: no
    /// lease, an answer holds for its connection only.
    public var confirmFor: Int?
    /// Which namespaces the caller may be in.
    public var namespaces: NamespaceScope
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
    /// The scope sets a caller may name (`scopes`); a request without scopes needs none.
    public var scopes: ScopeGrant
    /// The `params` names a caller may set (`params`); `*` any the provider allows.
    public var params: [String]

    public init(executable: String, forwarded: Bool = false, confirm: Bool = false, confirmFor: Int? = nil,
                namespaces: NamespaceScope = .user, unit: String? = nil, cgroupPrefix: String? = nil,
                resources: [String], providers: [String] = [], claims: Bool = false,
                scopes: ScopeGrant = .sets([]), params: [String] = []) {
        self.executable = executable
        self.forwarded = forwarded
        self.confirm = confirm
        self.confirmFor = confirm ? confirmFor : nil
        self.namespaces = namespaces
        self.unit = unit
        self.cgroupPrefix = cgroupPrefix
        self.resources = resources
        self.providers = providers
        self.claims = claims
        self.scopes = scopes.normalized
        self.params = params
    }

    func matches(_ caller: Caller) -> Bool {
        // A statx of the path, a few microseconds: what it names now, never a cached
        // number the file system may have given to another file since.
        guard let id = caller.executableID else { return false }
        guard forwarded ? Forwarders.identify(id) : FileID(path: executable) == id else { return false }
        if namespaces == .user, caller.inUserNamespaces != true { return false }
        if let unit, caller.unit != unit { return false }
        if let cgroupPrefix, !(caller.cgroup ?? "").hasPrefix(cgroupPrefix) { return false }
        return true
    }

    /// Whether the rule grants a token of `provider` for every one of `targets` (nil: the
    /// default audience), asked for with `scopes` (sorted, no duplicates) and `params` names.
    func grants(provider: String, targets: [String?], scopes: [String], params: some Collection<String>) -> Bool {
        guard providers.isEmpty || providers.contains(provider) else { return false }
        if !resources.contains("*") {
            guard targets.allSatisfy({ $0.map(resources.contains) ?? false }) else { return false }
        }
        guard scopes.isEmpty || self.scopes.allows(scopes) else { return false }
        return params.isEmpty || self.params.contains("*") || params.allSatisfy(self.params.contains)
    }
}

/// The scope sets an `[[allow]]` rule lets its program name (`scopes`).
public enum ScopeGrant: Sendable, Equatable {
    /// `scopes = "*"`: any the provider allows (its `scope_sets`, or sets of its `scopes`).
    case any
    /// `scopes = [["read"], ["read", "write"]]`: exactly these sets, in any order; none
    /// (the default) lets the program ask only without `scopes`.
    case sets([[String]])

    /// Whether `scopes` (sorted, no duplicates) is one of the sets.
    func allows(_ scopes: [String]) -> Bool {
        switch self {
        case .any: return true
        case .sets(let sets): return sets.contains(scopes)
        }
    }

    /// Each set sorted and without duplicates, as requests' scopes are compared.
    var normalized: ScopeGrant {
        switch self {
        case .any: return .any
        case .sets(let sets): return .sets(sets.map(CacheKey.normalized))
        }
    }
}

/// The caller policy. With no rules, every process of the user may have every token; with
/// rules, a caller gets only what some rule grants it. Management (sign-in, sign-out,
/// status, listing) is never restricted: it reveals no token.
public struct CallerPolicy: Sendable, Equatable {
    public var rules: [AllowRule]

    public init(rules: [AllowRule] = []) { self.rules = rules }

    public var isOpen: Bool { rules.isEmpty }

    /// Whether some rule names a unit or cgroup, so the caller's cgroup must be read.
    public var needsCgroup: Bool { rules.contains { $0.unit != nil || $0.cgroupPrefix != nil } }

    /// Whether `caller` may have a token for `resource` of `provider`, asked for with
    /// `scopes` and extra parameters named `params`.
    public func allowsToken(_ caller: Caller?, provider: String, resource: String?,
                            scopes: [String] = [], params: some Collection<String> = [String]()) -> Bool {
        allowsToken(caller, provider: provider, targets: [resource], scopes: scopes, params: params)
    }

    /// Whether one rule grants `caller` a token that names every one of `targets` (a token
    /// exchange names its resource and its audience: both are what the token is for).
    public func allowsToken(_ caller: Caller?, provider: String, targets: [String?],
                            scopes: [String], params: some Collection<String>) -> Bool {
        grant(caller, provider: provider, targets: targets, scopes: scopes, params: params) != .refused
    }

    /// What the rules say to `caller` asking for a token that names `targets`: a grant, a
    /// grant once the user confirms it (every rule that grants it has `confirm = true`), or
    /// a refusal. A rule without `confirm` that grants the same wins: it asks nothing.
    public func grant(_ caller: Caller?, provider: String, targets: [String?],
                      scopes: [String] = [], params: some Collection<String> = [String]()) -> Grant {
        if rules.isEmpty { return .granted }
        guard let caller else { return .refused }
        let scopes = CacheKey.normalized(scopes)
        var confirmed = false
        // What a rule grants is asked first: it costs nothing, and the executable needs a stat.
        for rule in rules where rule.grants(provider: provider, targets: targets, scopes: scopes, params: params) && rule.matches(caller) {
            if !rule.confirm { return .granted }
            confirmed = true
        }
        return confirmed ? .afterConfirmation : .refused
    }

    /// The `confirm = true` rules with a `confirm_for` that grant `caller` a token naming
    /// `targets`: the rules a lease may be given under (and is held to: a reload that
    /// changes or removes the rule ends its leases). Asked only once `grant` said
    /// `afterConfirmation`.
    public func leasingRules(_ caller: Caller, provider: String, targets: [String?],
                             scopes: [String] = [], params: some Collection<String> = [String]()) -> [AllowRule] {
        let scopes = CacheKey.normalized(scopes)
        return rules.filter {
            $0.confirm && $0.confirmFor != nil && $0.grants(provider: provider, targets: targets, scopes: scopes, params: params)
                && $0.matches(caller)
        }
    }

    /// What the rules say to one request.
    public enum Grant: Sendable, Equatable {
        case granted
        /// Granted once the user says yes (`confirm = true`).
        case afterConfirmation
        case refused
    }

    /// Whether `caller` may have some token of `provider`, whatever the resource; with
    /// `unasked`, without a question (a rule without `confirm`).
    public func allowsSomeToken(_ caller: Caller?, provider: String, unasked: Bool = false) -> Bool {
        if rules.isEmpty { return true }
        guard let caller else { return false }
        return rules.contains {
            !(unasked && $0.confirm) && ($0.providers.isEmpty || $0.providers.contains(provider)) && !$0.resources.isEmpty && $0.matches(caller)
        }
    }

    /// Whether `caller` may read the claims of accounts of `provider`.
    public func allowsClaims(_ caller: Caller?, provider: String) -> Bool {
        if rules.isEmpty { return true }
        guard let caller else { return false }
        return rules.contains { $0.claims && ($0.providers.isEmpty || $0.providers.contains(provider)) && $0.matches(caller) }
    }
}

/// The programs that carry connections over an ssh-forwarded socket: to the daemon, the
/// peer of such a connection is the local `ssh` client (`ssh -R remote:local`) or the
/// per-session `sshd` process (`ssh -L local:remote` from another host), never the program
/// that asks at the other end. A `forwarded = true` rule matches these files, at Debian's
/// paths, as an `exe` rule matches its own: by `FileID`, each path stat'ed on every
/// decision.
public enum Forwarders {
    /// OpenSSH's client, its server, and the server's per-session program (OpenSSH 9.8+).
    public static let paths = ["/usr/bin/ssh", "/usr/sbin/sshd", "/usr/lib/openssh/sshd-session"]

    /// Whether a process running the file `id` runs one of OpenSSH's programs.
    public static func identify(_ id: FileID) -> Bool {
        paths.contains { FileID(path: $0) == id }
    }
}
