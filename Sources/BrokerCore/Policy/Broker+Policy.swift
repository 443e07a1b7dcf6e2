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
    public func authorizeToken(_ identify: CallerIdentification, _ request: TokenGetParams) throws(BrokerError) {
        let policy = callerPolicy
        guard !policy.isOpen else { return }
        let caller = try identify(policy.needsCgroup)
        let provider = request.provider ?? provider(orDefault: nil)?.name ?? ""
        guard policy.allowsToken(caller, provider: provider, resource: request.resource) else {
            let who = caller?.description ?? "an unidentified caller"
            logger.notice("token refused by policy", metadata: ["caller": "\(who)", "provider": "\(provider)", "resource": "\(request.resource ?? "-")"])
            guard let caller else { throw Self.unidentifiedCaller }
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller.executable ?? "this program") may not have tokens for \(request.resource ?? "the default audience") of \(provider): add an [[allow]] rule for it to config.toml")
        }
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
