@testable import BrokerCore
import BrokerProtocol
import Logging
import Synchronization
import XCTest

/// Issue 38 item 1: leases, the user's "Allow for N minutes" to a `confirm = true` rule's
/// question. A lease serves its program (the executable's file; for a forwarded caller the
/// ssh process) the question it answered on new connections without asking, until its
/// time is up (a test clock), it is revoked, its provider signs out, or a reload changes
/// its rule; a rule without `confirm_for` offers none.
final class LeaseTests: XCTestCase {
    /// This test's own executable: a file that exists, which rules can name by path.
    private static let exe = PeerPath.realPath("/proc/self/exe")
    private let me = Caller(uid: 1000, gid: 1000, pid: 42, executable: LeaseTests.exe, executableID: FileID(path: LeaseTests.exe),
                            cgroup: nil, startTime: 1234)

    private func rule(resources: [String] = ["https://api"], confirmFor: Int? = 900) -> AllowRule {
        AllowRule(executable: Self.exe, confirm: true, confirmFor: confirmFor, resources: resources)
    }

    private func gate(_ rules: [AllowRule], answer: ConfirmAnswer = .leased) -> (CallerGate, Policies, TestClock, Asked) {
        let clock = TestClock()
        let policies = Policies(CallerPolicy(rules: rules))
        let asked = Asked(answer)
        let gate = CallerGate(source: policies, confirmer: asked, logger: Logger(label: "test"),
                              leases: LeaseTable(clock: clock.wallClock))
        return (gate, policies, clock, asked)
    }

    private func question(_ gate: CallerGate, _ caller: Caller, resource: String? = "https://api", audience: String? = nil) throws -> ConfirmQuestion? {
        let targets: [String?] = audience.map { [resource, $0] } ?? [resource]
        return try gate.decide(.token(provider: "corp", targets: targets, scopes: [], params: []), identify: { _ throws(BrokerError) in caller })
    }

    func testALeaseServesItsProgramOnNewConnectionsUntilItsTimeIsUp() async throws {
        let (gate, _, clock, asked) = gate([rule()])
        let first = try XCTUnwrap(try question(gate, me))
        XCTAssertEqual(first.lease?.seconds, 900)
        XCTAssertEqual(first.lease?.length, "15 minutes")
        XCTAssertEqual(first.lease?.holder.covers, Self.exe, "the question names the program a lease would cover")
        XCTAssertNil(gate.lease(for: first), "no lease before the user gives one")
        let outcome = try await gate.confirm(first, on: ConfirmAnswers())
        guard case .leased(let id, let seconds) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(seconds, 900)
        XCTAssertEqual(asked.count, 1)

        // Another process of the same file, on a new connection: the lease answers.
        var next = me
        next.pid = 4242
        next.startTime = 99
        let again = try XCTUnwrap(try question(gate, next))
        XCTAssertEqual(gate.lease(for: again), id)
        XCTAssertEqual(gate.leases.list().map(\.id), [String(id)])
        XCTAssertEqual(gate.leases.list().first?.program, Self.exe)
        XCTAssertEqual(gate.leases.list().first?.expiresAt, clock.now + 900)

        clock.advance(899)
        XCTAssertEqual(gate.lease(for: again), id)
        clock.advance(2)
        XCTAssertNil(gate.lease(for: again), "its time is up")
        XCTAssertEqual(gate.leases.list(), [])
    }

    /// A lease counts on CLOCK_BOOTTIME (issue 37, item 2): NTP stepping the wall clock
    /// back ten minutes lengthens no lease, and `expires_at` moves with the wall clock.
    func testAWallClockStepBackLengthensNoLease() async throws {
        let (gate, _, clock, _) = gate([rule()])
        let first = try XCTUnwrap(try question(gate, me))
        _ = try await gate.confirm(first, on: ConfirmAnswers())
        let shown = try XCTUnwrap(gate.leases.list().first?.expiresAt)
        clock.stepWall(-600)
        XCTAssertEqual(gate.leases.list().first?.expiresAt, shown - 600, "the same instant on the stepped wall clock")
        clock.advance(901)
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, me))), "its 15 minutes are up, whatever the wall clock says")
        XCTAssertEqual(gate.leases.list(), [])
    }

    func testALeaseCoversOnlyItsProgramAndWhatWasAsked() async throws {
        let (gate, _, _, _) = gate([rule(resources: ["https://api", "https://git"])])
        try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
        XCTAssertNotNil(gate.lease(for: try XCTUnwrap(try question(gate, me))))
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, me, resource: "https://git"))), "another resource")
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, me, audience: "https://git"))), "an exchange that names an audience too")
        // Another file at the same path (a copy, or the inode reused): no rule matches it.
        var copy = me
        copy.executableID = FileID(device: 1, inode: 1, stamp: 1)
        XCTAssertThrowsError(try question(gate, copy))
        // Another user's process of the same file (never served, but not leased either).
        var other = me
        other.uid = 1001
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, other))))
    }

    func testAForwardedLeaseIsForTheSshProcessThatCarriesTheForward() throws {
        try XCTSkipUnless(FileID(path: "/usr/bin/ssh") != nil, "needs Debian's openssh-client (scripts/setup)")
        let forwarded = AllowRule(executable: "", forwarded: true, confirm: true, confirmFor: 600, resources: ["https://api"])
        let (gate, _, _, _) = gate([forwarded])
        let ssh = Caller(uid: 1000, gid: 1000, pid: 7, executable: "/usr/bin/ssh", executableID: FileID(path: "/usr/bin/ssh"),
                         cgroup: nil, startTime: 555)
        let asked = try XCTUnwrap(try question(gate, ssh))
        XCTAssertEqual(asked.lease?.holder.forward, LeaseHolder.Forward(pid: 7, startTime: 555))
        XCTAssertTrue(asked.lease?.holder.covers.contains("ssh (pid 7)") == true)
        XCTAssertNotNil(gate.leases.give(asked))
        XCTAssertNotNil(gate.lease(for: try XCTUnwrap(try question(gate, ssh))), "another connection of the same forward")
        var otherSsh = ssh
        otherSsh.pid = 8
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, otherSsh))), "another ssh process: another forward")
        var reused = ssh
        reused.startTime = 556
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, reused))), "the same pid, another process")
        var unknown = ssh
        unknown.startTime = nil
        XCTAssertNil(try question(gate, unknown)?.lease, "no start time, no lease: a pid alone may be reused")
    }

    func testRevokeLogoutAndReloadEndLeases() async throws {
        let (gate, policies, _, _) = gate([rule(resources: ["https://api", "https://git"])])
        try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
        try await gate.confirm(XCTUnwrap(try question(gate, me, resource: "https://git")), on: ConfirmAnswers())
        let ids = gate.leases.list().map(\.id)
        XCTAssertEqual(ids.count, 2)
        XCTAssertEqual(gate.leases.revoke(id: ids[0]), 1)
        XCTAssertEqual(gate.leases.revoke(id: ids[0]), 0, "gone already")
        XCTAssertEqual(gate.leases.revoke(id: "nonsense"), 0)
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, me))))
        XCTAssertNotNil(gate.lease(for: try XCTUnwrap(try question(gate, me, resource: "https://git"))))

        XCTAssertEqual(gate.leases.end(provider: "other"), 0, "another provider's sign-out ends nothing")
        XCTAssertEqual(gate.leases.end(provider: "corp"), 1)
        XCTAssertEqual(gate.leases.list(), [])

        // A reload that keeps the rule keeps the lease; one that changes it ends it.
        try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
        XCTAssertEqual(gate.leases.keep(rules: policies.callerPolicy.rules), 0)
        XCTAssertNotNil(gate.lease(for: try XCTUnwrap(try question(gate, me))))
        policies.set(CallerPolicy(rules: [rule(resources: ["https://api"])]))
        // Held to the rule even before the reload's sweep: the changed rule is another rule.
        XCTAssertNil(gate.lease(for: try XCTUnwrap(try question(gate, me))))
        XCTAssertEqual(gate.leases.keep(rules: policies.callerPolicy.rules), 1)
        XCTAssertEqual(gate.leases.list(), [])
        // Revoke all.
        try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
        XCTAssertEqual(gate.leases.revokeAll(), 1)
    }

    func testARuleWithoutConfirmForOffersNoLeaseAndAnAnswerHoldsForItsConnection() async throws {
        let (gate, _, _, _) = gate([rule(confirmFor: nil)])
        let asked = try XCTUnwrap(try question(gate, me))
        XCTAssertNil(asked.lease)
        let answers = ConfirmAnswers()
        // A server that sends "allow-lease" anyway gets a yes for the connection, no lease.
        let outcome = try await gate.confirm(asked, on: answers)
        XCTAssertEqual(outcome, .once)
        XCTAssertEqual(gate.leases.list(), [])
        XCTAssertTrue(answers.allowed(asked))
    }

    func testTheLongestConfirmForOfTheRulesThatGrantIsOffered() throws {
        let (gate, _, _, _) = gate([rule(confirmFor: 300), rule(confirmFor: 3600), rule(resources: ["https://git"], confirmFor: 86400)])
        let asked = try XCTUnwrap(try question(gate, me))
        XCTAssertEqual(asked.lease?.seconds, 3600)
        XCTAssertEqual(asked.lease?.length, "1 hour")
        XCTAssertEqual(gate.leases.give(asked)?.seconds, 3600)
    }

    func testADeniedQuestionGivesNoLease() async throws {
        let (gate, _, _, _) = gate([rule()], answer: .denied)
        do {
            try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
            XCTFail("served after a Deny")
        } catch let error as BrokerError {
            XCTAssertTrue(error.message.contains("you refused"), error.message)
        }
        XCTAssertEqual(gate.leases.list(), [])
    }

    func testAServerThatOtherProgramsCanDriveIsRefusedWithTheFix() async throws {
        let (gate, _, _, _) = gate([rule()], answer: .answerableByOthers("mako (its fr.emersion.Mako interface: makoctl invoke answers a question for you)"))
        do {
            try await gate.confirm(XCTUnwrap(try question(gate, me)), on: ConfirmAnswers())
            XCTFail("served without a question")
        } catch let error as BrokerError {
            XCTAssertTrue(error.message.contains("mako"), error.message)
            XCTAssertTrue(error.message.contains("lets any program of yours answer"), error.message)
            XCTAssertTrue(error.message.contains("GNOME Shell"), error.message)
        }
    }

    func testConfirmForFromConfig() throws {
        let provider = "[providers.corp]\nissuer = \"https://a.example\"\nclient_id = \"x\"\n"
        func lease(_ value: String) throws -> Int? {
            try ConfigLoader.parse(provider + "[[allow]]\nexe = \"/usr/bin/git\"\nconfirm = true\nconfirm_for = \(value)\nresources = [\"*\"]\n",
                                   file: "c.toml").policy.rules.first?.confirmFor
        }
        XCTAssertEqual(try lease(#""15m""#), 900)
        XCTAssertEqual(try lease("90"), 90)
        XCTAssertEqual(try lease(#""2h""#), 7200)
        XCTAssertEqual(try lease(#""45s""#), 45)
        for bad in [#""5x""#, "5", "86401", #""m""#, "true", #""-1m""#] {
            XCTAssertThrowsError(try lease(bad), bad) { error in
                XCTAssertEqual((error as? ConfigError)?.key, "allow[0].confirm_for", "\(bad): \(error)")
            }
        }
        XCTAssertThrowsError(try ConfigLoader.parse(provider + "[[allow]]\nexe = \"/usr/bin/git\"\nconfirm_for = \"15m\"\nresources = [\"*\"]\n",
                                                    file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].confirm_for")
            XCTAssertTrue("\(error)".contains("confirm = true"), "\(error)")
        }
    }

    func testLeaseLengthsAsTheQuestionSaysThem() {
        XCTAssertEqual(LeaseOffer.describe(900), "15 minutes")
        XCTAssertEqual(LeaseOffer.describe(60), "1 minute")
        XCTAssertEqual(LeaseOffer.describe(7200), "2 hours")
        XCTAssertEqual(LeaseOffer.describe(90), "90 seconds")
    }

    /// The broker as the daemon builds it: `logout` ends the leases of the account's
    /// provider, and a reload that changes the rule ends its leases.
    func testTheBrokersLogoutAndReloadEndLeases() async throws {
        let h = try await BrokerHarness()
        var config = try BrokerHarness.config()
        config.policy = CallerPolicy(rules: [rule()])
        _ = try await h.broker.reload(config)
        let gate = h.broker.gate
        func give() throws {
            let asked = try XCTUnwrap(try question(gate, me))
            XCTAssertNotNil(gate.leases.give(asked))
            XCTAssertNotNil(gate.lease(for: try XCTUnwrap(try question(gate, me))))
        }
        try give()
        _ = try await h.broker.signOut.logout(LogoutParams(provider: "corp", local: true))
        XCTAssertEqual(gate.leases.list(), [], "signed out: its provider's leases end")

        try give()
        _ = try await h.broker.reload(config)
        XCTAssertEqual(gate.leases.list().count, 1, "a reload that keeps the rule keeps the lease")
        config.policy = CallerPolicy(rules: [rule(resources: ["https://api", "https://other"])])
        _ = try await h.broker.reload(config)
        XCTAssertEqual(gate.leases.list(), [], "a reload that changed the rule ended the lease")
    }
}

/// Rules that a test changes, as a reload would.
final class Policies: PolicySource, Sendable {
    private let rules: Mutex<CallerPolicy>
    init(_ policy: CallerPolicy) { rules = Mutex(policy) }
    func set(_ policy: CallerPolicy) { rules.withLock { $0 = policy } }
    var callerPolicy: CallerPolicy { rules.withLock { $0 } }
    func defaultProviderName() -> String? { "corp" }
    var confirmTimeout: Int { 5 }
}

/// A confirmer that answers every question the same, counting them.
private final class Asked: CallerConfirming, Sendable {
    private let answer: ConfirmAnswer
    private let asked = Mutex(0)
    init(_ answer: ConfirmAnswer) { self.answer = answer }
    var count: Int { asked.withLock { $0 } }
    func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer {
        asked.withLock { $0 += 1 }
        return answer
    }
}

enum PeerPath {
    /// Where `path` leads, links followed.
    static func realPath(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }
}
