import ArgumentParser
@testable import authctl
import BrokerClient
import BrokerProtocol
import XCTest
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The pieces of authctl that scripts rely on (docs/cli-json.md): suggestions for mistyped
/// commands, the JSON error object, completion names from config.toml, the git and
/// kubectl configuration it writes.
final class ScriptingTests: XCTestCase {
    // MARK: Mistyped commands

    func testMistypedCommandsGetTheClosestCommand() {
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["tokne"]), "unknown command 'tokne'. Did you mean 'token'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["stauts", "--json"]), "unknown command 'stauts'. Did you mean 'status'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["acount"]), "unknown command 'acount'. Did you mean 'accounts'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["log"]), "unknown command 'log'. Did you mean 'login' or 'logout'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["setup"]), "unknown command 'setup'. Did you mean 'setup-git' or 'setup-aws' or 'setup-gcloud'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["TOKEN"]), "unknown command 'TOKEN'. Did you mean 'token'?")
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["zzz"]), "unknown command 'zzz': `authctl --help` lists the commands")
        // Terminal control characters never reach the terminal.
        XCTAssertEqual(CommandLineMistakes.unknownCommand(["\u{1B}]0;x"]).map { $0.contains("\u{1B}") }, false)
    }

    func testCommandsOptionsAndHelpAreNotMistakes() {
        for command in CommandLineMistakes.commandNames {
            XCTAssertNil(CommandLineMistakes.unknownCommand([command, "--bogus"]), command)
        }
        XCTAssertNil(CommandLineMistakes.unknownCommand([]))
        XCTAssertNil(CommandLineMistakes.unknownCommand(["--help"]))
        XCTAssertNil(CommandLineMistakes.unknownCommand(["---completion", "token"]))
        XCTAssertTrue(CommandLineMistakes.commandNames.contains("setup-git"))
    }

    func testDistanceCountsATranspositionAsOneEdit() {
        XCTAssertEqual(CommandLineMistakes.distance(Array("tokne"), Array("token")), 1)
        XCTAssertEqual(CommandLineMistakes.distance(Array("tken"), Array("token")), 1)
        XCTAssertEqual(CommandLineMistakes.distance(Array(""), Array("token")), 5)
        XCTAssertEqual(CommandLineMistakes.distance(Array("exec"), Array("exec")), 0)
    }

    func testJSONIsWantedOnlyBeforeTheCommandsOwnArguments() {
        XCTAssertTrue(Failure.wantsJSON(["status", "--json"]))
        XCTAssertFalse(Failure.wantsJSON(["exec", "--resource", "r", "--", "tool", "--json"]))
        XCTAssertFalse(Failure.wantsJSON(["status", "--json=1"]))
    }

    // MARK: The JSON error object

    func testErrorObjectCarriesKindStatusCodeAndData() throws {
        let error = ClientError.rpc(RPCError(.loginRequired, "not signed in to corp: run `authctl login --provider corp`",
                                             data: ErrorData(provider: "corp")))
        let body = ErrorReport.Body(kind: ExitStatus(for: error).kind, message: DaemonCall.sentence(for: error),
                                    exitStatus: ExitStatus(for: error).rawValue, code: -32001, data: ErrorData(provider: "corp"))
        let object = try XCTUnwrap(JSONSerializationLite.object(ErrorReport(error: body).line))
        XCTAssertEqual(object, #"{"error":{"code":-32001,"data":{"provider":"corp"},"exit_status":4,"kind":"login_required","message":"not signed in to corp: run `authctl login --provider corp`"}}"#)
    }

    func testEveryExitStatusHasItsOwnKind() {
        let kinds = ExitStatus.allCases.map(\.kind)
        XCTAssertEqual(Set(kinds).count, kinds.count)
        XCTAssertEqual(ExitStatus.usage.kind, "usage")
        XCTAssertEqual(ExitStatus.daemonUnavailable.kind, "daemon_unavailable")
    }

    // MARK: status without a daemon

    func testNotRunningSaysWhy() throws {
        let gone = try XCTUnwrap(NotRunning(.daemonNotRunning(path: "/run/x/sock"), socketExists: { _ in false }))
        XCTAssertEqual(gone.reason, "no_socket")
        XCTAssertEqual(gone.socket, "/run/x/sock")
        XCTAssertTrue(gone.message.contains("systemctl --user start authbroker.socket"))
        // After a failed start systemd refuses `start` until the failure is reset.
        let reset = "systemctl --user reset-failed authbroker.socket authbroker.service"
        XCTAssertTrue(gone.message.contains(reset), gone.message)
        XCTAssertEqual(NotRunning(.daemonNotRunning(path: "/s"), socketExists: { _ in true })?.reason, "refused")
        XCTAssertEqual(NotRunning(.noSocketPath)?.reason, "no_socket_path")
        let closed = try XCTUnwrap(NotRunning(.io("authbrokerd closed the connection on /s before answering daemon.status")))
        XCTAssertEqual(closed.reason, "closed")
        XCTAssertTrue(closed.message.hasPrefix("authbrokerd is not running"))
        XCTAssertTrue(closed.message.contains(reset), closed.message)
        XCTAssertTrue(DaemonCall.sentence(for: .io("authbrokerd closed the connection")).contains(reset))
        XCTAssertEqual(NotRunning(.timedOut(method: "daemon.status", after: .seconds(15)))?.reason, "timed_out")
        // The daemon answered: not a "not running".
        XCTAssertNil(NotRunning(.rpc(RPCError(.internalError, "x"))))
        XCTAssertNil(NotRunning(.badResponse("x")))
        XCTAssertEqual(try JSONSerializationLite.object(try Output.json(gone, oneLine: true)),
                       try JSONSerializationLite.object(#"{"message":"\#(gone.message)","reason":"no_socket","running":false,"socket":"/run/x/sock"}"#))
    }

    // MARK: status with a daemon

    func testStatusShowsAStoreThatCannotBeReadAndARefusedReload() {
        let status = DaemonStatusResult(
            version: "1", pid: 7, uptimeSeconds: 60, store: "secret-service", socket: "/s",
            providers: [ProviderStatus(name: "corp", issuer: "https://idp", clientID: "c", accounts: [])], counters: Counters(),
            storeUnavailable: StoreUnavailableStatus(reason: "locked", message: "the keyring is locked: unlock it"),
            reloadRefused: ReloadRefusedStatus(at: 1_000, message: "the new configuration is not valid: config.toml:3: x"))
        let text = Status.report(status, now: 1_090).joined(separator: "\n")
        XCTAssertTrue(text.contains("unavailable (locked): the keyring is locked: unlock it"), text)
        XCTAssertTrue(text.contains("last reload  refused 1m 30s ago") || text.contains("refused 1m 30s ago"), text)
        XCTAssertTrue(text.contains("still running on the previous configuration: the new configuration is not valid: config.toml:3: x"), text)
        XCTAssertTrue(text.contains("no account loaded yet"), text)
        XCTAssertFalse(text.contains("sign in with"), "not sent to sign in again while the store is unreadable: \(text)")
    }

    // MARK: Completions

    func testConfiguredNamesComeFromTheProvidersTables() throws {
        let names = try XCTUnwrap(ConfiguredNames(parsing: """
            [daemon]
            store = "memory"
            [providers.zeta]
            issuer = "https://z.example.com"
            client_id = "z"
            [providers.corp]
            issuer = "https://login.example.com"
            client_id = "c"
            resources = ["https://api.example.com", "https://git.example.com"]
            """))
        XCTAssertEqual(names.providers, [
            .init(name: "corp", resources: ["https://api.example.com", "https://git.example.com"]),
            .init(name: "zeta", resources: []),
        ])
        XCTAssertNil(ConfiguredNames(parsing: "[providers.corp\n"))
        XCTAssertEqual(ConfiguredNames(parsing: "")?.providers, [])
        XCTAssertNil(ConfiguredNames.load(path: "/nonexistent/authbroker/config.toml"))
    }

    func testResourceCompletionFollowsTheProviderOnTheCommandLine() {
        XCTAssertEqual(Completions.providerNamed(in: ["authctl", "token", "--provider", "corp", "--resource", ""]), "corp")
        XCTAssertEqual(Completions.providerNamed(in: ["authctl", "token", "--provider=home", "--resource"]), "home")
        XCTAssertNil(Completions.providerNamed(in: ["authctl", "token", "--resource", ""]))
        XCTAssertNil(Completions.providerNamed(in: ["authctl", "token", "--provider"]))
    }

    func testConfigPathIsTheDaemons() {
        let env = ["AUTHBROKER_CONFIG": "/etc/x.toml", "XDG_CONFIG_HOME": "/c", "HOME": "/h"]
        XCTAssertEqual(ConfigPath.resolve(environment: { env[$0] }), "/etc/x.toml")
        XCTAssertEqual(ConfigPath.resolve(environment: { $0 == "AUTHBROKER_CONFIG" ? nil : env[$0] }), "/c/authbroker/config.toml")
        XCTAssertEqual(ConfigPath.resolve(environment: { $0 == "HOME" ? "/h" : nil }), "/h/.config/authbroker/config.toml")
    }

    // MARK: setup-git

    func testGitHelperIsForTheResourcesOriginOnly() {
        XCTAssertEqual(GitHelperSetup.origin(of: "https://Git.Example.com/team/repo"), "https://git.example.com")
        XCTAssertEqual(GitHelperSetup.origin(of: "https://git.example.com:8443"), "https://git.example.com:8443")
        XCTAssertEqual(GitHelperSetup.origin(of: "http://127.0.0.1:3000/"), "http://127.0.0.1:3000")
        XCTAssertNil(GitHelperSetup.origin(of: "http://git.example.com"))
        XCTAssertNil(GitHelperSetup.origin(of: "git.example.com"))
        XCTAssertEqual(GitHelperSetup.origin(of: "https://user@git.example.com"), "https://git.example.com")
        let helper = GitHelperSetup.helper(resource: "https://git.example.com", provider: "corp", account: "a b",
                                           username: nil, executable: "/opt/auth ctl/authctl")
        XCTAssertEqual(helper, "!'/opt/auth ctl/authctl' git-credential --resource https://git.example.com --provider corp --account 'a b'")
        XCTAssertEqual(GitHelperSetup.shellLine(["echo", "it's", ""]), #"echo 'it'\''s' ''"#)
        let setup = GitHelperSetup(url: "https://git.example.com", helper: helper)
        XCTAssertEqual(setup.setCommands.map { $0.last }, [setup.key, "", helper])
        XCTAssertEqual(setup.unsetCommands, [["git", "config", "--global", "--unset-all", "credential.https://git.example.com.helper"]])
    }

    func testSetupGitNeedsOneTarget() {
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["setup-git"]))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["setup-git", "--host", "a", "--resource", "https://a"]))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["setup-git", "--host", "https://a"]))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["setup-git", "--resource", "ftp://a"]))
        XCTAssertNoThrow(try AuthCtl.parseAsRoot(["setup-git", "--host", "git.example.com:8443", "--unset", "--dry-run"]))
    }

    // MARK: kube-credential --print-kubeconfig

    func testKubeconfigRunsThisCommandAsItsExecPlugin() throws {
        let command = try XCTUnwrap(AuthCtl.parseAsRoot(["kube-credential", "--print-kubeconfig", "--resource", "https://k8s.example.com",
                                                         "--provider", "corp", "--scope", "a b", "--server", "https://10.0.0.1:6443"]) as? KubeCredential)
        let yaml = Kubeconfig.build(command.kubeconfig, token: command.token, command: "/usr/bin/authctl").yaml()
        XCTAssertEqual(yaml, [
            "apiVersion: v1", "kind: Config",
            "clusters:", "- name: corp", "  cluster:", "    server: https://10.0.0.1:6443",
            "contexts:", "- name: corp", "  context:", "    cluster: corp", "    user: corp",
            "current-context: corp",
            "users:", "- name: corp", "  user:", "    exec:",
            "      apiVersion: client.authentication.k8s.io/v1",
            "      command: /usr/bin/authctl",
            "      args:", "      - kube-credential", "      - --resource", "      - https://k8s.example.com",
            "      - --scope", "      - \"a b\"", "      - --provider", "      - corp",
            "      interactiveMode: \(Kubeconfig.interactiveMode)",
            "      provideClusterInfo: false",
        ])
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["kube-credential", "--server", "https://x"]))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["kube-credential", "--print-kubeconfig", "--certificate-authority", "ca.pem"]))
    }

    func testKubeconfigForAnOlderKubectlSaysV1beta1() throws {
        let command = try XCTUnwrap(AuthCtl.parseAsRoot(["kube-credential", "--print-kubeconfig", "--resource", "https://k8s.example.com",
                                                         "--exec-api-version", "v1beta1"]) as? KubeCredential)
        let yaml = Kubeconfig.build(command.kubeconfig, token: command.token, command: "/usr/bin/authctl").yaml()
        XCTAssertTrue(yaml.contains("      apiVersion: client.authentication.k8s.io/v1beta1"), "\(yaml)")
        let full = try XCTUnwrap(AuthCtl.parseAsRoot(["kube-credential", "--print-kubeconfig",
                                                      "--exec-api-version", "client.authentication.k8s.io/v1"]) as? KubeCredential)
        XCTAssertTrue(Kubeconfig.build(full.kubeconfig, token: full.token).yaml().contains("      apiVersion: client.authentication.k8s.io/v1"))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["kube-credential", "--print-kubeconfig", "--exec-api-version", "v1alpha1"]))
        XCTAssertThrowsError(try AuthCtl.parseAsRoot(["kube-credential", "--exec-api-version", "v1beta1"]))
    }

    func testYAMLQuotesWhatWouldReadBackAsSomethingElse() {
        let node = Kubeconfig.Node.list(["yes", "8443", "a: b", "#x", "-x", "ok/path", "quote\"", "tab\t"].map(Kubeconfig.Node.string))
        XCTAssertEqual(node.yaml(), [#"- "yes""#, #"- "8443""#, #"- "a: b""#, ##"- "#x""##, #"- "-x""#, "- ok/path",
                                     #"- "quote\"""#, #"- "tab\u0009""#])
    }
}

/// JSON text with its object keys sorted, so two texts compare by content.
enum JSONSerializationLite {
    static func object(_ text: String) throws -> String {
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        return try Output.json(value, oneLine: true)
    }
}
