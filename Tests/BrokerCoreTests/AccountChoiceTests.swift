@testable import BrokerCore
import BrokerProtocol
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// Which account a request that names none gets (issue 39 item 4): `default_account` and
/// the `[[providers.NAME.accounts]]` rules, first match first, `account` always winning.
/// The harness's accounts are all username `alice`, so rules name them by subject.
final class AccountChoiceTests: XCTestCase {
    // MARK: Patterns

    func testDirectoryPatternsWithTheHomeFolder() {
        let work = PathPattern("~/work/**")
        XCTAssertTrue(work.matches("/home/u/work", home: "/home/u"), "dir/** is the folder itself too")
        XCTAssertTrue(work.matches("/home/u/work/", home: "/home/u/"))
        XCTAssertTrue(work.matches("/home/u/work/acme/app", home: "/home/u"))
        XCTAssertFalse(work.matches("/home/u/workshop", home: "/home/u"))
        XCTAssertFalse(work.matches("/home/u2/work/app", home: "/home/u"), "another user's home is not ~")
        XCTAssertFalse(work.matches("/home/u/work/app", home: nil), "no home: ~ matches nothing")
        XCTAssertFalse(work.matches("/srv/work/app", home: "/home/u"))

        let one = PathPattern("/src/*/app")
        XCTAssertTrue(one.matches("/src/acme/app"))
        XCTAssertFalse(one.matches("/src/acme/sub/app"), "* stays within one folder")
        XCTAssertTrue(PathPattern("/src/**/app").matches("/src/acme/sub/app"))
        XCTAssertTrue(PathPattern("/src/**/app").matches("/src/app"), "**/ may be no folder at all")
        XCTAssertTrue(PathPattern("/src/acme-?").matches("/src/acme-1"))
        XCTAssertFalse(PathPattern("/src/acme").matches("/src/acme/app"), "no glob: that folder only")
    }

    func testGitRemotePatterns() {
        let acme = PathPattern("https://github.com/acme/*")
        XCTAssertTrue(acme.matches("https://github.com/acme/app.git"))
        XCTAssertFalse(acme.matches("https://github.com/acme-evil/app.git"))
        XCTAssertFalse(acme.matches("https://github.com/other/app.git"))
        XCTAssertFalse(acme.matches("https://github.com"), "without credential.useHttpPath git sends no path")
        XCTAssertTrue(PathPattern("https://*.example.com/**").matches("https://git.example.com/team/app"))
        XCTAssertFalse(PathPattern("https://*.example.com/**").matches("https://git.example.com.evil/app"))
    }

    // MARK: Configuration

    func testRulesAreReadInOrderAndCheckedKeyByKey() throws {
        let config = try BrokerHarness.config(providerKeys: """
            default_account = "alice-personal"
            [[providers.corp.accounts]]
            account = "alice-work"
            directory = "~/work/**"
            [[providers.corp.accounts]]
            account = "alice-oss"
            git_remote = "https://github.com/acme/*"
            [[providers.corp.accounts]]
            environment = true
            """)
        let corp = try XCTUnwrap(config.provider(named: "corp"))
        XCTAssertEqual(corp.defaultAccount, "alice-personal")
        XCTAssertEqual(corp.accountRules.map(\.label), ["directory ~/work/**", "git_remote https://github.com/acme/*", "environment AUTHBROKER_ACCOUNT"])
        XCTAssertEqual(corp.accountRules.map(\.account), ["alice-work", "alice-oss", nil])

        func refusal(_ rule: String) -> String? {
            do {
                _ = try BrokerHarness.config(providerKeys: "[[providers.corp.accounts]]\n" + rule)
                return nil
            } catch let error as ConfigError {
                return "\(error.key ?? ""): \(error.problem)"
            } catch {
                return "\(error)"
            }
        }
        XCTAssertEqual(refusal("account = \"a\""), "providers.corp.accounts[0]: needs exactly one of directory, git_remote or environment = true")
        XCTAssertEqual(refusal("account = \"a\"\ndirectory = \"/w\"\ngit_remote = \"https://x/*\""), "providers.corp.accounts[0]: needs exactly one of directory, git_remote or environment = true")
        XCTAssertEqual(refusal("directory = \"/w/**\""), "providers.corp.accounts[0].account: is missing: name the account this rule chooses (its username, display name or subject)")
        XCTAssertEqual(refusal("account = \"a\"\ndirectory = \"work/**\""), "providers.corp.accounts[0].directory: must be an absolute path pattern, or start with ~/: \"~/work/**\"")
        XCTAssertEqual(refusal("account = \"a\"\nenvironment = true"), "providers.corp.accounts[0].account: is not for an environment = true rule, which takes the account AUTHBROKER_ACCOUNT names")
        XCTAssertEqual(refusal("environment = false"), "providers.corp.accounts[0].environment: can only be true (leave it out to ignore AUTHBROKER_ACCOUNT)")
        XCTAssertNotNil(refusal("account = \"a\"\ndirectroy = \"/w\""), "unknown keys are errors")
    }

    // MARK: Choosing

    /// Two accounts, sub-alice and sub-bob, and rules for them.
    private func harness(_ keys: String) async throws -> BrokerHarness {
        try await BrokerHarness(alsoSignedIn: ["sub-bob"], providerKeys: keys)
    }

    private func subject(_ h: BrokerHarness, _ params: TokenGetParams) async throws -> (String, String?) {
        let answer = try await h.token(params)
        let key = try XCTUnwrap(h.broker.tokens.key(holding: answer.accessToken))
        return (key.account.subject, answer.chosenBy)
    }

    func testDefaultAccountChoosesAmongSeveralAndTheCacheHitSaysSo() async throws {
        let h = try await harness("default_account = \"sub-bob\"")
        let first = try await subject(h, TokenGetParams())
        XCTAssertEqual(first.0, "sub-bob")
        XCTAssertEqual(first.1, "default_account")
        let hit = try XCTUnwrap(h.broker.tokens.cachedToken(TokenGetParams()), "default_account is decided on the cache-hit path")
        XCTAssertEqual(hit.chosenBy, "default_account")
        XCTAssertNotNil(hit.cacheHit, "nothing about the caller: the front door may answer the same bytes again")
        // An explicit account always wins.
        let named = try await subject(h, TokenGetParams(account: "sub-alice"))
        XCTAssertEqual(named.0, "sub-alice")
        XCTAssertEqual(named.1, "account param")
    }

    func testAGitRemoteRuleMatchesFirstAndTheAccountParamWins() async throws {
        let h = try await harness("""
            default_account = "sub-alice"
            [[providers.corp.accounts]]
            account = "sub-bob"
            git_remote = "https://git/acme/*"
            [[providers.corp.accounts]]
            account = "sub-alice"
            git_remote = "https://git/**"
            """)
        let acme = TokenGetParams(resource: "https://git", context: TokenContext(gitRemote: "https://git/acme/app.git"))
        let chosen = try await subject(h, acme)
        XCTAssertEqual(chosen.0, "sub-bob")
        XCTAssertEqual(chosen.1, "git_remote https://git/acme/*", "the first rule that matches")
        XCTAssertEqual(h.broker.tokens.cachedToken(acme)?.chosenBy, "git_remote https://git/acme/*", "a remote in the request is decided on the cache-hit path")
        let other = try await subject(h, TokenGetParams(resource: "https://git", context: TokenContext(gitRemote: "https://git/other/app.git")))
        XCTAssertEqual(other.0, "sub-alice")
        XCTAssertEqual(other.1, "git_remote https://git/**")
        var explicit = acme
        explicit.account = "sub-alice"
        let named = try await subject(h, explicit)
        XCTAssertEqual(named.0, "sub-alice")
        XCTAssertEqual(named.1, "account param")
        let none = try await subject(h, TokenGetParams(resource: "https://git"))
        XCTAssertEqual(none.1, "default_account", "no remote: the rules do not match")
    }

    func testTheEnvironmentIsHonouredOnlyWhereARuleAllowsIt() async throws {
        let without = try await harness("")
        let ignored = await without.tokenError(TokenGetParams(accountHint: "sub-bob"))
        XCTAssertEqual(ignored, .invalidRequest(message: "several accounts are signed in to corp (alice, alice); AUTHBROKER_ACCOUNT is ignored, as no rule of [[providers.corp.accounts]] has environment = true: name one (`--account` for authctl, `account` in a request), or set default_account or an account rule in [providers.corp] of config.toml (docs/configuration.md, \"Which account\")"))

        let with = try await harness("""
            [[providers.corp.accounts]]
            environment = true
            """)
        let chosen = try await subject(with, TokenGetParams(accountHint: "sub-bob"))
        XCTAssertEqual(chosen.0, "sub-bob")
        XCTAssertEqual(chosen.1, "environment AUTHBROKER_ACCOUNT")
        let missing = await with.tokenError(TokenGetParams(accountHint: "carol"))
        XCTAssertEqual(missing, .loginRequired(provider: "corp", message: "no account carol is signed in to corp (chosen by environment AUTHBROKER_ACCOUNT): run `authctl login --provider corp`"))
    }

    func testADirectoryRuleReadsTheCallersWorkingDirectoryOffTheCacheHitPath() async throws {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let here = String(cString: getcwd(&buffer, buffer.count)!)
        let h = try await harness("""
            [[providers.corp.accounts]]
            account = "sub-bob"
            directory = "\(here)/**"
            """)
        let me = Requester.Lookup { RequestingProgram(executable: nil, pid: getpid(), forwarded: false) }
        let chosen = try await Requester.$lookup.withValue(me) { try await self.subject(h, TokenGetParams()) }
        XCTAssertEqual(chosen.0, "sub-bob")
        XCTAssertEqual(chosen.1, "directory \(here)/**")
        XCTAssertNil(h.broker.tokens.cachedToken(TokenGetParams()), "the cache-hit path reads no /proc: the slow path decides")
        let again = try await Requester.$lookup.withValue(me) { try await h.broker.tokens.token(TokenGetParams()) }
        XCTAssertEqual(again.chosenBy, "directory \(here)/**")

        // A forwarded caller's peer is ssh: its directory says nothing of the program that asks.
        let forwarded = Requester.Lookup { RequestingProgram(executable: nil, pid: getpid(), forwarded: true) }
        let refused = await Requester.$lookup.withValue(forwarded) { await h.tokenError() }
        XCTAssertEqual(refused, .invalidRequest(message: "several accounts are signed in to corp (alice, alice), and no rule of [[providers.corp.accounts]] matched this caller (working directory unknown): name one (`--account` for authctl, `account` in a request), or set default_account or an account rule in [providers.corp] of config.toml (docs/configuration.md, \"Which account\")"))
    }

    func testNothingMatchingSaysWhatTheRulesSaw() async throws {
        let h = try await harness("""
            [[providers.corp.accounts]]
            account = "sub-bob"
            directory = "/nowhere/**"
            [[providers.corp.accounts]]
            account = "sub-bob"
            git_remote = "https://git/acme/*"
            """)
        let me = Requester.Lookup { RequestingProgram(executable: nil, pid: getpid(), forwarded: false) }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let here = String(cString: getcwd(&buffer, buffer.count)!)
        let refused = await Requester.$lookup.withValue(me) {
            await h.tokenError(TokenGetParams(context: TokenContext(gitRemote: "https://git/other/x")))
        }
        XCTAssertEqual(refused, .invalidRequest(message: "several accounts are signed in to corp (alice, alice), and no rule of [[providers.corp.accounts]] matched this caller (working directory \(here), git remote https://git/other/x): name one (`--account` for authctl, `account` in a request), or set default_account or an account rule in [providers.corp] of config.toml (docs/configuration.md, \"Which account\")"))
    }

    func testARuleForAnAccountNotSignedInSaysWhichRuleChoseIt() async throws {
        let h = try await harness("""
            [[providers.corp.accounts]]
            account = "alice-work"
            git_remote = "https://git/acme/*"
            """)
        let refused = await h.tokenError(TokenGetParams(resource: "https://git", context: TokenContext(gitRemote: "https://git/acme/app")))
        XCTAssertEqual(refused, .loginRequired(provider: "corp", message: "no account alice-work is signed in to corp (chosen by git_remote https://git/acme/*): run `authctl login --provider corp`"))
    }
}
