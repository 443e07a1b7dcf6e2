import BrokerProtocol
import Logging

/// Reads the caller's identity when a policy needs it: `needsCgroup` says whether a rule
/// names a unit or cgroup. Throws when the connection's process is no longer the one that
/// connected.
public typealias CallerIdentification = (_ needsCgroup: Bool) throws(BrokerError) -> Caller?

/// What the gate needs to know of the configuration: the rules in force, the provider a
/// request without one means, and how long a `confirm` question waits.
public protocol PolicySource: Sendable {
    /// The `[[allow]]` rules in force (none: every process of the user is served).
    var callerPolicy: CallerPolicy { get }
    /// The provider a request that names none means, or nil.
    func defaultProviderName() -> String?
    /// `[daemon] confirm_timeout`, in seconds.
    var confirmTimeout: Int { get }
    /// Whether no rule is in force (`callerPolicy.isOpen`), without copying the policy.
    var callerPolicyIsOpen: Bool { get }
}

extension PolicySource {
    public var callerPolicyIsOpen: Bool { callerPolicy.isOpen }
}

/// The caller policy in one place: the server asks it about every request, with the
/// question the method's registration reads from the params (`Access`), before any service
/// or cache sees the request, on every path (the front door hands connections to NIO while
/// rules are in force, so its requests meet the same handler and the same gate). Status and
/// events ask it what a caller may see.
public final class CallerGate: Sendable {
    private let source: any PolicySource
    /// Asks the user before a `confirm = true` rule's caller gets a token; without one,
    /// such rules serve nothing.
    private let confirmer: (any CallerConfirming)?
    private let logger: Logger
    /// The leases the user gave ("Allow for N minutes"), which answer `confirm` questions
    /// without asking; listed and ended through `GrantsService`.
    public let leases: LeaseTable
    /// Where decisions on tokens are written (`AuditTrail`); nil: nowhere (tests).
    public let audit: AuditTrail?

    public init(source: any PolicySource, confirmer: (any CallerConfirming)?, logger: Logger,
                leases: LeaseTable = LeaseTable(), audit: AuditTrail? = nil) {
        self.source = source
        self.confirmer = confirmer
        self.logger = logger
        self.leases = leases
        self.audit = audit
    }

    /// The `[[allow]]` rules in force.
    public var policy: CallerPolicy { source.callerPolicy }

    /// Whether no rule is in force: asked of every request the front door serves, so read
    /// without a lock or a copy of the policy.
    public var isOpen: Bool { source.callerPolicyIsOpen }

    /// Decides one request. Cheap enough for every request: with no rules nothing is read
    /// (the caller is not even identified).
    /// - Returns: the question to ask the user first when only `confirm = true` rules grant
    ///   it (`confirm(_:on:)`), else nil.
    /// - Throws: `forbidden` (-32002) naming the program and what it may not have.
    /// The question is read from the request only when rules are in force: without them
    /// a request costs one lock and no allocation here.
    public func decide(_ question: @autoclosure () -> PolicyQuestion?, identify: CallerIdentification) throws(BrokerError) -> ConfirmQuestion? {
        guard !isOpen else { return nil }
        let policy = self.policy
        guard !policy.isOpen, let question = question() else { return nil }
        let caller = try identify(policy.needsCgroup)
        switch question {
        case .token(let provider, let targets, let scopes, let params):
            return try authorize(caller, policy: policy, provider: provider, targets: targets, scopes: scopes, params: params)
        case .reject(let provider, let targets, let scopes, let params):
            // A reject gives nothing out: asking "Allow a token?" for it would be a question
            // about something else, and a Deny would keep a token its server refused.
            _ = try authorize(caller, policy: policy, provider: provider, targets: targets, scopes: scopes, params: params)
            return nil
        case .claims(let provider):
            try authorizeClaims(caller, policy: policy, provider: provider)
            return nil
        case .signIn(let provider, let resource):
            try authorizeSignIn(caller, policy: policy, provider: provider, resource: resource)
            return nil
        }
    }

    /// The caller as far as the rules need it, for what it may see (`daemon.status`,
    /// events); nil when it cannot be identified, or no rules are in force.
    public func caller(_ identify: CallerIdentification) -> Caller? {
        let policy = self.policy
        guard !policy.isOpen else { return nil }
        return (try? identify(policy.needsCgroup)) ?? nil
    }

    /// Whether `caller` may see a token of `provider` for `resource` (status, events): when
    /// it may get it now, without a question. What only a `confirm = true` rule grants is
    /// shown once the user said yes to it on the connection (`answers`), not before: a
    /// program the user never allowed learns nothing of the tokens others use.
    public func shows(_ caller: Caller?, provider: String, resource: String?, answers: ConfirmAnswers?) -> Bool {
        let policy = self.policy
        switch policy.grant(caller, provider: provider, targets: [resource]) {
        case .granted: return true
        case .afterConfirmation:
            var question = ConfirmQuestion(provider: provider, resource: resource)
            if answers?.allowed(question) == true { return true }
            // A lease the user gave the program shows as a yes on the connection would.
            guard let caller else { return false }
            question.lease = leaseOffer(caller, policy: policy, provider: provider, targets: [resource], scopes: [], params: [])
            return leases.covering(question) != nil
        case .refused: return false
        }
    }

    /// The id of the lease that answers `question` (which `decide` returned) now, if one
    /// does: the request is then granted without a question.
    public func lease(for question: ConfirmQuestion) -> Int? {
        guard question.lease != nil else { return nil }
        return leases.covering(question)
    }

    /// The lease a question to `caller` may offer: the longest `confirm_for` of the rules
    /// that grant the request, for the program as those rules match it; nil when none has
    /// one, or the caller cannot hold a lease.
    private func leaseOffer(_ caller: Caller, policy: CallerPolicy, provider: String, targets: [String?],
                            scopes: [String], params: [String]) -> LeaseOffer? {
        let rules = policy.leasingRules(caller, provider: provider, targets: targets, scopes: scopes, params: params)
        guard let seconds = rules.compactMap(\.confirmFor).max(), let holder = LeaseHolder(caller) else { return nil }
        return LeaseOffer(seconds: seconds, holder: holder, rules: rules)
    }

    /// Whether a subscriber identified as `caller` may hear of `event`: an event about a
    /// resource when it may see that resource's tokens (`shows`), any other when it may get
    /// some token of the event's provider without a question, or the user said yes to one
    /// on the connection (`answers`).
    public func shows(_ event: BrokerEvent, to caller: Caller?, answers: ConfirmAnswers?) -> Bool {
        let policy = self.policy
        guard !policy.isOpen else { return true }
        if let resource = event.resource {
            return shows(caller, provider: event.provider, resource: resource, answers: answers)
        }
        if policy.allowsSomeToken(caller, provider: event.provider, unasked: true) { return true }
        guard policy.allowsSomeToken(caller, provider: event.provider) else { return false }
        if answers?.allowedSome(of: event.provider) == true { return true }
        guard let caller, let holder = LeaseHolder(caller) else { return false }
        return leases.holdsSome(holder, provider: event.provider, rules: policy.rules.filter { $0.confirm && $0.matches(caller) })
    }

    /// Refuses a token for `targets` (every parameter that names what the token is for) the
    /// rules do not grant `caller`: one rule must grant them all, with the scopes and params.
    private func authorize(_ caller: Caller?, policy: CallerPolicy, provider named: String?, targets: [String?],
                           scopes: [String], params: [String]) throws(BrokerError) -> ConfirmQuestion? {
        let provider = named ?? source.defaultProviderName() ?? ""
        switch policy.grant(caller, provider: provider, targets: targets, scopes: scopes, params: params) {
        case .granted: return nil
        case .afterConfirmation:
            // Every target is asked about: an exchange's token is for its audience too.
            let named = targets.compactMap { $0 }
            let offer = caller.flatMap { leaseOffer($0, policy: policy, provider: provider, targets: targets, scopes: scopes, params: params) }
            return ConfirmQuestion(provider: provider, resource: named.first, audience: named.dropFirst().first, lease: offer)
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
    private func authorizeClaims(_ caller: Caller?, policy: CallerPolicy, provider named: String?) throws(BrokerError) {
        let provider = named ?? source.defaultProviderName() ?? ""
        guard policy.allowsClaims(caller, provider: provider) else {
            logger.notice("claims refused by policy", metadata: ["caller": "\(caller?.description ?? "unknown")", "provider": "\(provider)"])
            guard let caller else { throw Self.unidentifiedCaller }
            throw BrokerError.forbidden(message: "forbidden by policy: \(caller.executable ?? "this program") may not read the account's claims at \(provider): add claims = true to its [[allow]] rule")
        }
    }

    /// Refuses a sign-in on demand to a caller no rule grants any token of the provider (or
    /// of the resource it names): it could never use the account, and must not be able to
    /// put a sign-in in front of the user.
    private func authorizeSignIn(_ caller: Caller?, policy: CallerPolicy, provider named: String?, resource: String?) throws(BrokerError) {
        let provider = named ?? source.defaultProviderName() ?? ""
        let allowed = resource.map { policy.allowsToken(caller, provider: provider, resource: $0) }
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

extension CallerGate {
    /// What the user's yes was.
    public enum ConfirmOutcome: Sendable, Equatable {
        /// "Allow once" (or Allow, where no lease was offered): this connection.
        case once
        /// "Allow for N minutes": the lease `id`, of `seconds`.
        case leased(id: Int, seconds: Int)
    }

    /// Waits for the user's yes to `question` (a `confirm = true` rule granted the request),
    /// asked once per connection (`answers`). A lease the user chooses is given here (once,
    /// however many requests shared the question).
    /// - Throws: `forbidden` saying what happened when the answer is anything but yes.
    @discardableResult
    public func confirm(_ question: ConfirmQuestion, on answers: ConfirmAnswers) async throws(BrokerError) -> ConfirmOutcome {
        let program = Requester.program
        let seconds = source.confirmTimeout
        let answer = await answers.answer(question) { [confirmer, leases] in
            guard let confirmer else { return .unavailable("authbrokerd shows no desktop notifications") }
            let answer = await confirmer.confirm(question, program: program, seconds: seconds)
            guard answer == .leased else { return answer }
            // Only a question that offered a lease has one to give; else it is a yes here.
            return leases.give(question) == nil ? .allowed : .leased
        }
        let who = program?.description ?? "this program"
        let what = "a token for \(question.tokenFor) of \(question.provider)"
        logger.notice("confirmation", metadata: [
            "caller": "\(who)", "provider": "\(question.provider)", "resource": "\(question.resource ?? "-")", "audience": "\(question.audience ?? "-")", "answer": "\(answer)",
        ])
        switch answer {
        case .allowed:
            return .once
        case .leased:
            guard let id = leases.covering(question), let offered = question.lease?.seconds else { return .once }
            return .leased(id: id, seconds: offered)
        case .answerableByOthers(let server):
            throw .forbidden(message: "forbidden by policy: the [[allow]] rule for \(who) has confirm = true, but the desktop's notification server, \(server), lets any program of yours answer its questions, so an Allow there could come from the program that asks: authbrokerd does not ask there. Use a notification server no other program can answer (GNOME Shell, KDE Plasma), or, for a program you trust, a rule without confirm for its file (docs/security.md, \"confirm on the desktop\")")
        case .denied:
            throw .forbidden(message: "forbidden by policy: you refused \(who) \(what) in the desktop notification; it is not asked again on this connection: connect again to be asked again")
        case .dismissed:
            throw .forbidden(message: "forbidden by policy: the desktop notification asking whether \(who) may have \(what) was closed without an answer: ask again and choose Allow")
        case .timedOut:
            throw .forbidden(message: "forbidden by policy: no answer within \(seconds) seconds to the desktop notification asking whether \(who) may have \(what): ask again and choose Allow")
        case .busy(let limit):
            throw .overloaded(message: "\(limit) questions of [[allow]] rules with confirm = true wait for your answer in desktop notifications already: answer or dismiss them, then ask again")
        case .programBusy(let limit):
            throw .overloaded(message: "\(limit) questions of \(who) wait for your answer in desktop notifications already (one program may have \(limit) waiting at once; other programs are still asked): answer or dismiss them, then ask again")
        case .unavailable(let why):
            throw .forbidden(message: "forbidden by policy: the [[allow]] rule for \(who) has confirm = true, but authbrokerd cannot ask you: no desktop notification could be shown (\(why)); run authbrokerd in your desktop session, or remove confirm from the rule")
        }
    }
}

/// A policy that does not change: no rules (every caller served) unless given some. For a
/// method table built without a configuration (tests, the fuzz targets).
public struct FixedPolicy: PolicySource {
    public var callerPolicy: CallerPolicy
    public var defaultProvider: String?
    public var confirmTimeout: Int

    public init(_ policy: CallerPolicy = CallerPolicy(), defaultProvider: String? = nil, confirmTimeout: Int = 60) {
        self.callerPolicy = policy
        self.defaultProvider = defaultProvider
        self.confirmTimeout = confirmTimeout
    }

    public func defaultProviderName() -> String? { defaultProvider }
}
