import BrokerProtocol
import Logging
import Synchronization

/// Whom a lease is for: the program as the `[[allow]]` rules match it — its executable's
/// file (device, inode and inode birth, `FileID`), whichever process runs it — and the
/// user of the connection. For a forwarded caller (the peer runs OpenSSH) the file says
/// nothing of the program at the other end, so the lease is for the forward: that one ssh
/// process (pid and start time), whose connections all come from the host it is logged
/// in to, and it ends with it.
public struct LeaseHolder: Sendable, Equatable {
    public var uid: UInt32
    public var executable: FileID
    /// The ssh process carrying the forward: pid and start time; nil for an executable.
    public var forward: Forward?
    /// The executable's path as read when the question was asked, for people (not compared:
    /// a hard link is the same program).
    public var path: String

    public struct Forward: Sendable, Equatable {
        public var pid: Int32
        public var startTime: UInt64
    }

    /// The holder `caller` would be; nil when it cannot hold one (its file not read, or a
    /// forwarded caller whose start time is unknown: a pid alone may be reused).
    public init?(_ caller: Caller) {
        guard let executable = caller.executableID else { return nil }
        self.uid = caller.uid
        self.executable = executable
        self.path = caller.executable ?? "the program"
        if Forwarders.identify(executable) {
            guard let start = caller.startTime else { return nil }
            forward = Forward(pid: caller.pid, startTime: start)
        }
    }

    public static func == (a: LeaseHolder, b: LeaseHolder) -> Bool {
        a.uid == b.uid && a.executable == b.executable && a.forward == b.forward
    }

    /// What the question says a lease would cover: "/usr/bin/claude", or "ssh (pid 42)
    /// and every program at the other end of its forwarded socket".
    public var covers: String {
        guard let forward else { return path }
        return "ssh (pid \(forward.pid)) and every program at the other end of its forwarded socket"
    }
}

/// What a `confirm = true` question may offer besides "Allow once": a lease of at most
/// `seconds` (the longest `confirm_for` of the rules that grant the request) for `holder`.
public struct LeaseOffer: Sendable {
    public var seconds: Int
    public var holder: LeaseHolder
    /// The rules that grant the request and have a `confirm_for`: a lease is given under
    /// the one whose `confirm_for` it has, and holds only while that rule grants the
    /// request unchanged.
    var rules: [AllowRule]

    /// "15 minutes", "1 hour", "90 seconds".
    public var length: String { Self.describe(seconds) }

    static func describe(_ seconds: Int) -> String {
        func unit(_ n: Int, _ name: String) -> String { n == 1 ? "1 \(name)" : "\(n) \(name)s" }
        if seconds % 3600 == 0 { return unit(seconds / 3600, "hour") }
        if seconds % 60 == 0 { return unit(seconds / 60, "minute") }
        return unit(seconds, "second")
    }
}

/// The leases in force (docs/security.md, "Leases"): "Allow for N minutes" answers to
/// `confirm = true` questions, in memory only (a restart ends them all). A lease serves its
/// holder the question it answered — the provider, resource and audience — without asking
/// again, until it expires, is revoked (`grants.revoke`), its provider's account signs out
/// (`TokenForgetting.forget`), or a reload changes or removes the rule it was given under.
/// The gate asks it; the grants service lists and revokes.
public final class LeaseTable: Sendable {
    struct Lease: Sendable {
        var id: Int
        var holder: LeaseHolder
        var provider: String
        var resource: String?
        var audience: String?
        /// The rule it was given under, as it was then.
        var rule: AllowRule
        /// When it was given, on the wall clock (shown).
        var granted: Double
        /// When it ends, on CLOCK_BOOTTIME: a wall clock stepped back by NTP or by hand
        /// lengthens no lease (`WallClock`).
        var expires: Double

        func answers(_ question: ConfirmQuestion, holder: LeaseHolder) -> Bool {
            provider == question.provider && resource == question.resource && audience == question.audience && self.holder == holder
        }

        /// As listed; `offset` turns its boot-time end into the wall clock's (`ClockReading.offset`).
        func info(offset: Double) -> GrantInfo {
            GrantInfo(id: String(id), program: holder.path, forwarded: holder.forward != nil, pid: holder.forward?.pid,
                      uid: holder.uid, provider: provider, resource: resource, audience: audience,
                      grantedAt: granted, expiresAt: expires + offset)
        }
    }

    private struct State {
        var leases: [Lease] = []
        var nextID = 1
    }

    private let state = Mutex(State())
    private let clock: WallClock
    private let logger: Logger?
    /// Leases kept at once: each takes a click of the user, so this is never met but by a
    /// user who clicks for hours; the oldest goes first.
    static let capacity = 256

    public init(clock: WallClock = .system, logger: Logger? = nil) {
        self.clock = clock
        self.logger = logger
    }

    /// Gives the lease the user chose in answer to `question` (which offered it): the
    /// offer's longest length, under the rule that has it. One that answers the same
    /// question for the same holder is replaced. Returns its id and length.
    @discardableResult
    func give(_ question: ConfirmQuestion) -> (id: Int, seconds: Int)? {
        guard let offer = question.lease, let rule = offer.rules.max(by: { ($0.confirmFor ?? 0) < ($1.confirmFor ?? 0) }),
              let seconds = rule.confirmFor else { return nil }
        let reading = clock.reading()
        let now = reading.boot
        let id = state.withLock { s -> Int in
            s.leases.removeAll { $0.answers(question, holder: offer.holder) || $0.expires <= now }
            if s.leases.count >= Self.capacity { s.leases.removeFirst() }
            let id = s.nextID
            s.nextID += 1
            s.leases.append(Lease(id: id, holder: offer.holder, provider: question.provider, resource: question.resource,
                                  audience: question.audience, rule: rule, granted: reading.wall, expires: now + Double(seconds)))
            return id
        }
        logger?.notice("lease given", metadata: [
            "lease": "\(id)", "program": "\(offer.holder.covers)", "provider": "\(question.provider)",
            "for": "\(question.tokenFor)", "seconds": "\(seconds)",
        ])
        return (id, seconds)
    }

    /// The id of the lease that answers `question` for its holder now, if one does: not
    /// expired, and given under one of the rules that grant the request as it stands (a
    /// rule changed by a reload is another rule). Expired leases are dropped on the way.
    public func covering(_ question: ConfirmQuestion) -> Int? {
        guard let offer = question.lease else { return nil }
        let now = clock.boottime()
        return state.withLock { s -> Int? in
            s.leases.removeAll { $0.expires <= now }
            return s.leases.first { $0.answers(question, holder: offer.holder) && offer.rules.contains($0.rule) }?.id
        }
    }

    /// Whether `holder` has a lease of some token of `provider` (what events may tell it).
    func holdsSome(_ holder: LeaseHolder, provider: String, rules: [AllowRule]) -> Bool {
        let now = clock.boottime()
        return state.withLock { s in
            s.leases.contains { $0.holder == holder && $0.provider == provider && $0.expires > now && rules.contains($0.rule) }
        }
    }

    /// The leases in force, the oldest first.
    public func list() -> [GrantInfo] {
        let now = clock.reading()
        return state.withLock { s in
            s.leases.removeAll { $0.expires <= now.boot }
            return s.leases.map { $0.info(offset: now.offset) }
        }
    }

    /// Ends the lease `id`; how many ended (0 or 1).
    @discardableResult
    public func revoke(id: String) -> Int {
        guard let number = Int(id) else { return 0 }
        return end("revoked", { $0.id == number })
    }

    /// Ends every lease; how many ended.
    @discardableResult
    public func revokeAll() -> Int { end("revoked", { _ in true }) }

    /// Ends the leases of `provider` (one of its accounts signed out): a lease answered a
    /// question about that sign-in's tokens.
    @discardableResult
    public func end(provider: String) -> Int { end("ended by a sign-out", { $0.provider == provider }) }

    /// Ends the leases whose rule is not among `rules` (a reload changed or removed it).
    @discardableResult
    public func keep(rules: [AllowRule]) -> Int { end("ended by a reload that changed its rule", { !rules.contains($0.rule) }) }

    private func end(_ how: String, _ which: (Lease) -> Bool) -> Int {
        let now = clock.boottime()
        let ended = state.withLock { s -> [Lease] in
            let ended = s.leases.filter { which($0) && $0.expires > now }
            s.leases.removeAll { which($0) || $0.expires <= now }
            return ended
        }
        for lease in ended {
            logger?.notice("lease \(how)", metadata: ["lease": "\(lease.id)", "program": "\(lease.holder.covers)", "provider": "\(lease.provider)"])
        }
        return ended.count
    }
}

/// `grants.list` and `grants.revoke`: the leases the user gave, listed and ended. Registered
/// by the composition root over the gate's `LeaseTable`, which owns them.
struct GrantsService: RegistersMethods {
    let leases: LeaseTable

    func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .grantsList, empty: NoParams(),
            access: .open("the user's own review of the leases they gave: which program may have which resource's tokens until when; no token, claim or secret"),
            answer: .later { _ throws(BrokerError) in GrantsListResult(grants: leases.list()) }))
        registrar.add(MethodSpec(
            .grantsRevoke, empty: GrantsRevokeParams(),
            access: .open("ends leases only: the program is asked again on its next request; nothing is given out or widened"),
            answer: .later { p throws(BrokerError) in
                switch (p.id, p.all) {
                case (let id?, nil), (let id?, false?):
                    return GrantsRevokeResult(revoked: leases.revoke(id: id))
                case (nil, true?):
                    return GrantsRevokeResult(revoked: leases.revokeAll())
                default:
                    throw BrokerError.invalidRequest(message: "grants.revoke takes either id (one lease, as grants.list names it) or all: true")
                }
            }))
    }
}
