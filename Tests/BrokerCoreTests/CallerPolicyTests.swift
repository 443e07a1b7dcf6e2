@testable import BrokerCore
import XCTest

final class CallerPolicyTests: XCTestCase {
    let git = Caller(uid: 1000, gid: 1000, pid: 42, executable: "/usr/bin/git",
                     cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.scope")

    func testNoRulesAllowEverything() {
        let open = CallerPolicy()
        XCTAssertTrue(open.allowsToken(git, provider: "corp", resource: "https://x"))
        XCTAssertTrue(open.allowsClaims(nil, provider: "corp"))
    }

    func testRulesGrantOnlyWhatTheyName() {
        let policy = CallerPolicy(rules: [AllowRule(executable: "/usr/bin/git", resources: ["https://git.example.com"], providers: ["corp"])])
        XCTAssertTrue(policy.allowsToken(git, provider: "corp", resource: "https://git.example.com"))
        XCTAssertFalse(policy.allowsToken(git, provider: "corp", resource: "https://api.example.com"))
        XCTAssertFalse(policy.allowsToken(git, provider: "other", resource: "https://git.example.com"))
        XCTAssertFalse(policy.allowsToken(git, provider: "corp", resource: nil), "the default audience needs \"*\"")
        XCTAssertFalse(policy.allowsClaims(git, provider: "corp"), "claims need claims = true")
        var curl = git
        curl.executable = "/usr/bin/curl"
        XCTAssertFalse(policy.allowsToken(curl, provider: "corp", resource: "https://git.example.com"))
        XCTAssertFalse(policy.allowsToken(nil, provider: "corp", resource: "https://git.example.com"), "an unidentified caller gets nothing")
    }

    func testUnitAndCgroupConditions() {
        XCTAssertEqual(git.unit, "app-org.gnome.Terminal.scope")
        let byUnit = CallerPolicy(rules: [AllowRule(executable: "/usr/bin/git", unit: "app-org.gnome.Terminal.scope", resources: ["*"])])
        XCTAssertTrue(byUnit.allowsToken(git, provider: "corp", resource: nil))
        let elsewhere = CallerPolicy(rules: [AllowRule(executable: "/usr/bin/git", unit: "ci.service", resources: ["*"])])
        XCTAssertFalse(elsewhere.allowsToken(git, provider: "corp", resource: "https://x"))
        let byCgroup = CallerPolicy(rules: [AllowRule(executable: "/usr/bin/git", cgroupPrefix: "/user.slice/user-1000.slice/", resources: ["*"], claims: true)])
        XCTAssertTrue(byCgroup.allowsClaims(git, provider: "corp"))
        let otherSlice = CallerPolicy(rules: [AllowRule(executable: "/usr/bin/git", cgroupPrefix: "/system.slice/", resources: ["*"])])
        XCTAssertFalse(otherSlice.allowsToken(git, provider: "corp", resource: "https://x"))
    }

    func testAllowRulesFromConfig() throws {
        let config = try ConfigLoader.parse("""
            [providers.corp]
            issuer = "https://a.example"
            client_id = "x"

            [[allow]]
            exe = "/usr/bin/git"
            resources = ["https://git.example.com"]

            [[allow]]
            exe = "/usr/bin/python3"
            resources = ["*"]
            claims = true
            unit = "batch.service"
            """, file: "c.toml")
        XCTAssertEqual(config.policy.rules.count, 2)
        XCTAssertEqual(config.policy.rules[1], AllowRule(executable: "/usr/bin/python3", unit: "batch.service", resources: ["*"], claims: true))
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"git\"\n", file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].exe")
        }
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"/usr/bin/git\"\nproviders=[\"nope\"]\n", file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].providers")
        }
    }
}
