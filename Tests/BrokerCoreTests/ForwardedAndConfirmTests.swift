@testable import BrokerCore
import BrokerProtocol
import Logging
import Synchronization
import XCTest

/// `forwarded = true` and `confirm = true` rules: what they match, what they grant, how
/// they are read from the file, and how a connection remembers the user's answer.
final class ForwardedAndConfirmTests: XCTestCase {
    let ssh = Caller(uid: 1000, gid: 1000, pid: 7, executable: "/usr/bin/ssh", executableID: FileID(path: "/usr/bin/ssh"), cgroup: nil)
    let git = Caller(uid: 1000, gid: 1000, pid: 42, executable: "/usr/bin/git", executableID: FileID(path: "/usr/bin/git"), cgroup: nil)

    func testAForwardedRuleMatchesOpenSSHAndNothingElse() throws {
        try XCTSkipUnless(FileID(path: "/usr/bin/ssh") != nil, "needs Debian's openssh-client (scripts/setup)")
        let policy = CallerPolicy(rules: [AllowRule(executable: "", forwarded: true, resources: ["https://api"])])
        XCTAssertTrue(policy.allowsToken(ssh, provider: "corp", resource: "https://api"))
        XCTAssertFalse(policy.allowsToken(ssh, provider: "corp", resource: "https://other"))
        XCTAssertFalse(policy.allowsToken(git, provider: "corp", resource: "https://api"))
        // A copy of ssh elsewhere is another file: not a forwarder.
        var copy = ssh
        copy.executableID = FileID(device: 1, inode: 1)
        XCTAssertFalse(policy.allowsToken(copy, provider: "corp", resource: "https://api"))
    }

    func testConfirmGrantsOnlyAfterTheUserSaysYesUnlessAnotherRuleGrantsOutright() {
        let asking = AllowRule(executable: "/usr/bin/git", confirm: true, resources: ["*"])
        let confirmOnly = CallerPolicy(rules: [asking])
        XCTAssertEqual(confirmOnly.grant(git, provider: "corp", targets: ["https://git"]), .afterConfirmation)
        XCTAssertTrue(confirmOnly.allowsToken(git, provider: "corp", resource: "https://git"))
        XCTAssertEqual(confirmOnly.grant(ssh, provider: "corp", targets: ["https://git"]), .refused)
        let both = CallerPolicy(rules: [asking, AllowRule(executable: "/usr/bin/git", resources: ["https://git"])])
        XCTAssertEqual(both.grant(git, provider: "corp", targets: ["https://git"]), .granted)
        XCTAssertEqual(both.grant(git, provider: "corp", targets: ["https://api"]), .afterConfirmation)
    }

    private let provider = "[providers.corp]\nissuer = \"https://a.example\"\nclient_id = \"x\"\n"

    func testForwardedAndConfirmFromConfig() throws {
        let config = try ConfigLoader.parse(provider + """
            [daemon]
            confirm_timeout = 30

            [[allow]]
            forwarded = true
            confirm = true
            resources = ["https://api"]
            """, file: "c.toml")
        XCTAssertEqual(config.daemon.confirmTimeout, 30)
        XCTAssertEqual(config.policy.rules, [AllowRule(executable: "", forwarded: true, confirm: true, resources: ["https://api"])])
        XCTAssertEqual(try ConfigLoader.parse(provider, file: "c.toml").daemon.confirmTimeout, 60)
    }

    func testForwardedWithAnExeOrNonBooleanFlagsAreRefused() {
        let cases: [(String, String)] = [
            ("[[allow]]\nforwarded = true\nexe = \"/usr/bin/ssh\"\n", "allow[0].exe"),
            ("[[allow]]\nforwarded = \"yes\"\n", "allow[0].forwarded"),
            ("[[allow]]\nexe = \"/usr/bin/git\"\nconfirm = 1\n", "allow[0].confirm"),
            ("[[allow]]\nresources = [\"*\"]\n", "allow[0].exe"),
            ("[daemon]\nconfirm_timeout = 0\n", "daemon.confirm_timeout"),
        ]
        for (text, key) in cases {
            XCTAssertThrowsError(try ConfigLoader.parse(provider + text, file: "c.toml"), text) { error in
                XCTAssertEqual((error as? ConfigError)?.key, key, "\(text): \(error)")
            }
        }
    }

    func testAConnectionRemembersYesAndNoButNotSilence() async {
        let answers = ConfirmAnswers()
        let question = ConfirmQuestion(provider: "corp", resource: "https://api")
        let asked = Count()
        let timedOut = await answers.answer(question) { asked.add(); return .timedOut }
        XCTAssertEqual(timedOut, .timedOut)
        XCTAssertFalse(answers.allowed(question))
        let yes = await answers.answer(question) { asked.add(); return .allowed }
        XCTAssertEqual(yes, .allowed)
        XCTAssertTrue(answers.allowed(question))
        let again = await answers.answer(question) { asked.add(); return .denied }
        XCTAssertEqual(again, .allowed, "asked once per connection")
        XCTAssertEqual(asked.value, 2)
        // Another resource is another question; a no is remembered too.
        let other = ConfirmQuestion(provider: "corp", resource: "https://git")
        XCTAssertFalse(answers.allowed(other))
        let no = await answers.answer(other) { .denied }
        XCTAssertEqual(no, .denied)
        let later = await answers.answer(other) { .allowed }
        XCTAssertEqual(later, .denied)
    }

    func testConcurrentRequestsShareOneQuestion() async {
        let answers = ConfirmAnswers()
        let question = ConfirmQuestion(provider: "corp", resource: nil)
        let asked = Count()
        await withTaskGroup(of: ConfirmAnswer.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    await answers.answer(question) {
                        asked.add()
                        try? await Task.sleep(for: .milliseconds(50))
                        return .allowed
                    }
                }
            }
            for await answer in group { XCTAssertEqual(answer, .allowed) }
        }
        XCTAssertEqual(asked.value, 1)
    }

    func testAConfirmOnlyCallerHearsOfNothingUntilTheUserSaysYesOnItsConnection() async {
        let gate = CallerGate(source: FixedPolicy(CallerPolicy(rules: [
            AllowRule(executable: "/usr/bin/git", confirm: true, resources: ["https://git"]),
        ])), confirmer: nil, logger: Logger(label: "test"))
        let answers = ConfirmAnswers()
        let signedIn = BrokerEvent(kind: .signedIn, provider: "corp", account: "alice")
        let refreshed = BrokerEvent(kind: .tokenRefreshed, provider: "corp", account: "alice", resource: "https://git")
        XCTAssertFalse(gate.shows(signedIn, to: git, answers: answers))
        XCTAssertFalse(gate.shows(refreshed, to: git, answers: answers))
        XCTAssertFalse(gate.shows(git, provider: "corp", resource: "https://git", answers: answers))
        _ = await answers.answer(ConfirmQuestion(provider: "corp", resource: "https://git")) { .allowed }
        XCTAssertTrue(gate.shows(signedIn, to: git, answers: answers))
        XCTAssertTrue(gate.shows(refreshed, to: git, answers: answers))
        XCTAssertTrue(gate.shows(git, provider: "corp", resource: "https://git", answers: answers))
        XCTAssertFalse(gate.shows(BrokerEvent(kind: .signedIn, provider: "other", account: "alice"), to: git, answers: answers),
                       "a yes for one provider shows nothing of another")
    }

    func testTheProgramAsTheUserIsShownIt() {
        XCTAssertEqual(RequestingProgram(executable: "/usr/bin/authctl", pid: 42, forwarded: false).description, "authctl (pid 42)")
        XCTAssertEqual(RequestingProgram(executable: "/usr/bin/ssh", pid: 7, forwarded: true).description,
                       "ssh (pid 7), over a forwarded ssh socket")
        XCTAssertEqual(RequestingProgram(executable: nil, pid: 9, forwarded: false).description, "a program (pid 9)")
    }
}

/// How many times something was asked, from any task.
private final class Count: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
