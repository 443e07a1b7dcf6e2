@testable import BrokerCore
import Foundation
import XCTest

final class CallerPolicyTests: XCTestCase {
    let git = Caller(uid: 1000, gid: 1000, pid: 42, executable: "/usr/bin/git", executableID: FileID(path: "/usr/bin/git"),
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
        curl.executableID = FileID(path: "/usr/bin/curl")
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
        XCTAssertEqual(config.policy.rules[1].namespaces, .user, "only the user's own namespaces unless a rule says otherwise")
        let any = try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"/usr/bin/git\"\nnamespaces=\"any\"\n", file: "c.toml")
        XCTAssertEqual(any.policy.rules[0].namespaces, .any)
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"/usr/bin/git\"\nnamespaces=\"some\"\n", file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].namespaces")
        }
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"git\"\n", file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].exe")
        }
        XCTAssertThrowsError(try ConfigLoader.parse("[providers.corp]\nissuer=\"https://a\"\nclient_id=\"x\"\n[[allow]]\nexe=\"/usr/bin/git\"\nproviders=[\"nope\"]\n", file: "c.toml")) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "allow[0].providers")
        }
    }

    /// A rule names a file, not a path: a copy is refused, a hard link is the same program,
    /// and a package upgrade (a new file renamed over the path) is followed.
    func testRulesMatchTheFileNotThePath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ab-policy-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tool = dir + "/tool", copy = dir + "/copy", link = dir + "/link"
        try Data("v1".utf8).write(to: URL(fileURLWithPath: tool))
        try FileManager.default.copyItem(atPath: tool, toPath: copy)
        try FileManager.default.linkItem(atPath: tool, toPath: link)
        let policy = CallerPolicy(rules: [AllowRule(executable: tool, resources: ["*"])])
        func caller(_ path: String, namespaces: Bool? = true) -> Caller {
            Caller(uid: 1000, gid: 1000, pid: 7, executable: tool, executableID: FileID(path: path), cgroup: nil, inUserNamespaces: namespaces)
        }
        XCTAssertTrue(policy.allowsToken(caller(tool), provider: "corp", resource: "r"))
        XCTAssertTrue(policy.allowsToken(caller(link), provider: "corp", resource: "r"), "a hard link is the same file")
        XCTAssertFalse(policy.allowsToken(caller(copy), provider: "corp", resource: "r"), "a copy is another file, whatever path it reports")
        XCTAssertFalse(policy.allowsToken(caller(tool, namespaces: false), provider: "corp", resource: "r"), "another namespace needs namespaces = \"any\"")
        XCTAssertFalse(policy.allowsToken(caller(tool, namespaces: nil), provider: "corp", resource: "r"), "unknown namespaces are not the user's")
        let anywhere = CallerPolicy(rules: [AllowRule(executable: tool, namespaces: .any, resources: ["*"])])
        XCTAssertTrue(anywhere.allowsToken(caller(tool, namespaces: false), provider: "corp", resource: "r"))

        // An upgrade writes the new version beside the old one and renames it over the path.
        let old = caller(tool)
        try Data("v2".utf8).write(to: URL(fileURLWithPath: dir + "/tool.new"))
        XCTAssertEqual(rename(dir + "/tool.new", tool), 0)
        XCTAssertTrue(policy.allowsToken(caller(tool), provider: "corp", resource: "r"), "the rule follows the path to the new file")
        XCTAssertFalse(policy.allowsToken(old, provider: "corp", resource: "r"), "the replaced file is no longer the rule's")
    }
}

/// Issue 21 item 1: an inode number the file system gives again after a package upgrade
/// freed it is not the rule's file.
final class InodeReuseTests: XCTestCase {
    func testAFileThatGotTheReplacedFilesInodeNumberIsRefused() throws {
        // A real ext4 (or any file system that hands out freed inode numbers again); on
        // tmpfs numbers only grow and the reuse below is never reached.
        let dir = FileManager.default.currentDirectoryPath + "/.build/ab-inode-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tool = dir + "/tool"
        try Data("v1".utf8).write(to: URL(fileURLWithPath: tool))
        let policy = CallerPolicy(rules: [AllowRule(executable: tool, resources: ["*"])])
        func caller(_ path: String) -> Caller {
            Caller(uid: 1000, gid: 1000, pid: 7, executable: path, executableID: FileID(path: path), cgroup: nil)
        }
        let before = try XCTUnwrap(FileID(path: tool))
        XCTAssertTrue(policy.allowsToken(caller(tool), provider: "corp", resource: "r"))

        // A package upgrade renames the new version over the path; the old inode is freed.
        try Data("v2".utf8).write(to: URL(fileURLWithPath: dir + "/tool.new"))
        XCTAssertEqual(rename(dir + "/tool.new", tool), 0)
        // Another program of the user makes files until one gets the freed number.
        var recycled: String?
        for i in 0..<50_000 {  // kept, so each file takes the next free number
            let path = dir + "/f\(i)"
            let fd = open(path, O_CREAT | O_WRONLY, 0o700)
            XCTAssertGreaterThanOrEqual(fd, 0)
            var st = stat()
            fstat(fd, &st)
            close(fd)
            if UInt64(st.st_ino) == before.inode && UInt64(st.st_dev) == before.device { recycled = path; break }
        }
        let attacker = try XCTUnwrap(recycled, "the file system never gave the freed inode number again")
        XCTAssertNotEqual(FileID(path: attacker), before, "same device and inode number, but another file")
        XCTAssertFalse(policy.allowsToken(caller(attacker), provider: "corp", resource: "r"),
                       "a file that got the replaced file's inode number is not the rule's program")
        XCTAssertTrue(policy.allowsToken(caller(tool), provider: "corp", resource: "r"), "the new file at the rule's path is")
        XCTAssertFalse(policy.allowsToken(caller(attacker), provider: "corp", resource: "r"), "…and the recycled one still is not")
    }
}
