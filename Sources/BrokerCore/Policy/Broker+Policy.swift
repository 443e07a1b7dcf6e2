import BrokerProtocol

/// Reads the caller's identity when a policy needs it: `needsCgroup` says whether a rule
/// names a unit or cgroup. Throws when the connection's process is no longer the one that
/// connected.
public typealias CallerIdentification = (_ needsCgroup: Bool) throws(BrokerError) -> Caller?

extension Broker {
    /// The `[[allow]]` rules in force (none: every process of the user is served).
    public var callerPolicy: CallerPolicy { table.withLock { $0.config.policy } }  // not `config`: no copy of the whole configuration

    /// Refuses a token request the caller policy does not grant, naming the executable and
    /// the resource. Cheap enough for every request: no policy, no work (the caller is not
    /// even identified).
    /// - Returns: the question to ask the user first when only `confirm = true` rules grant
    ///   it (`confirm(_:on:)`), else nil.
    @discardableResult
    public func authorizeToken(_ identify: CallerIdentification, _ request: TokenGetParams) throws(BrokerError) -> ConfirmQuestion? {
        let policy = callerPolicy
        guard !policy.isOpen else { return nil }
        let caller = try identify(policy.needsCgroup)
        return try authorize(caller, policy: policy, provider: request.provider, targets: [request.resource],
                             scopes: request.scopes ?? [], params: request.params.map { Array($0.keys) } ?? [])
    }

    /// Refuses a token for `targets` (every parameter that names what the token is for) the
    /// rules do not grant `caller`: one rule must grant them all, with the scopes and params.
    /// - Returns: the question to ask the user first when only `confirm = true` rules grant
    ///   it, else nil.
    @discardableResult
    func authorize(_ caller: Caller?, policy: CallerPolicy, provider named: String?, targets: [String?],
                   scopes: [String], params: [String]) throws(BrokerError) -> ConfirmQuestion? {
        let provider = named ?? provider(orDefault: nil)?.name ?? ""
        switch policy.grant(caller, provider: provider, targets: targets, scopes: scopes, params: params) {
        case .granted: return nil
        case .afterConfirmation: return ConfirmQuestion(provider: provider, resource: targets.compactMap { $0 }.first)
        case .refused: break
        }
        let asked = targets.map { $0 ?? "the default audience" }.joined(separator: " and ")
        logger.notice("token refused by policy", metadata: ["caller": "\(caller?.description ?? "an unidentified caller")", "provider": "\(provider)", "resource": "\(asked)"])
        guard let caller else { throw Self.unidentifiedCaller }
        let who = caller.executable ?? "this program"
        if !scopes.isEmpty || !params.isEmpty,
           policy.allowsToken(caller, provider: provider, targets: targets, scopes: [], params: [String]()) {
            // The resource is granted: say which of the caller's own choices is not.
            var named: [String] = []
            if !scopes.isEmpty { named.append("the scopes \(CacheKey.normalized(scopes).joined(separator: " "))") }
            if !params.isEmpty { named.append("the params \(params.sorted().joined(separator: ", "))") }
            throw BrokerError.forbidden(message: "forbidden by policy: \(who) may not ask for \(named.joined(separator: " and ")) with tokens for \(asked) of \(provider): add them to its [[allow]] rule in config.toml (scopes = [[...]], params = [...])")
        }
        // Over a forwarded socket the peer is OpenSSH, whatever program asks at the other end.
        let rule = Forwarders.paths.contains(who)
            ? "it is ssh carrying a forwarded socket, so the program that asks runs at the other end: add an [[allow]] rule with forwarded = true (and confirm = true to be asked each time) to config.toml"
            : "add an [[allow]] rule for it to config.toml"
        throw BrokerError.forbidden(message: "forbidden by policy: \(who) may not have tokens for \(asked) of \(provider): \(rule)")
    }

    /// Refuses `account.whoami` / `account.userinfo` to callers without `claims = true`.
    public func authorizeClaims(_ identify: CallerIdentification, _ params: AccountParams) throws(BrokerError) {
        let policy = callerPolicy
        guard !policy.isOpen else { return }
        let caller = try identify(policy.needsCgroup)
        let provider = params.provider ?? provider(orDefault: nil)?.name ?? ""
        guard policy.allowsClaims(caller, provider: provider) else {
            logger.notice("claims refused by policy", metadata: ["caller": "\(caller?.description ?? "unknown")", "provider": "\(provider)"])
            guard let caller else { throw Self.unidentifiedCaller }
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller.executable ?? "this program") may not read the account's claims at \(provider): add claims = true to its [[allow]] rule")
        }
    }

    /// Refuses a sign-in on demand (`login.start` with `join`) to a caller no rule grants
    /// any token of the provider (or of the resource it names): it could never use the
    /// account, and must not be able to put a sign-in in front of the user.
    /// `authctl login` (no `join`) stays open: it is the user's own management.
    public func authorizeSignIn(_ identify: CallerIdentification, _ params: LoginStartParams) throws(BrokerError) {
        guard params.join == true else { return }
        let policy = callerPolicy
        guard !policy.isOpen else { return }
        let caller = try identify(policy.needsCgroup)
        let provider = params.provider ?? provider(orDefault: nil)?.name ?? ""
        let allowed = params.resource.map { policy.allowsToken(caller, provider: provider, resource: $0) }
            ?? policy.allowsSomeToken(caller, provider: provider)
        guard allowed else {
            logger.notice("sign-in on demand refused by policy", metadata: ["caller": "\(caller?.description ?? "unknown")", "provider": "\(provider)"])
            guard let caller else { throw Self.unidentifiedCaller }
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller.executable ?? "this program") may have no token of \(provider), so it cannot start its sign-in: add an [[allow]] rule for it to config.toml, or sign in with `authctl login --provider \(provider)`")
        }
    }

    /// The refusal of a caller the server could not identify (no process to look at): a
    /// rule would not help, so it does not ask for one. The server says more where it knows
    /// why (`PeerIdentity`).
    static let unidentifiedCaller = BrokerError.forbidden(
        message: "forbidden by policy: authbrokerd could not identify the program that asks (it ended, or the kernel did not say who connected), so no [[allow]] rule can match it: connect again from the program itself")
}
