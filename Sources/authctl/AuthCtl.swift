import ArgumentParser
import BrokerProtocol

/// `authctl`: the command-line client of authbrokerd.
///
/// Synchronous on purpose: `authctl token` runs inside `$(…)` before every `curl`, and a
/// plain `ParsableCommand` starts no concurrency runtime threads.
@main
struct AuthCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Sign in to OAuth 2.0 / OpenID Connect providers and get access tokens from authbrokerd.",
        discussion: """
            authctl talks to authbrokerd, the per-user token broker, on its Unix socket: \
            $AUTHBROKER_SOCKET, else $XDG_RUNTIME_DIR/authbroker/socket. On a host reached \
            by ssh, forward the daemon's socket there (ssh -R PATH:/run/user/UID/authbroker/socket) \
            and set $AUTHBROKER_SOCKET=PATH; in an ssh session a missing socket is reported as \
            a missing forward.

              authctl login --device
              curl -H "$(authctl token --resource https://api.example.com --header)" URL

            Errors are one line on stderr, starting with "authctl: ", that says what to do next. \
            A call that gets no answer within 15 s (say, a daemon that cannot start) ends with \
            exit status 3; $AUTHBROKER_TIMEOUT sets other whole seconds (0: no limit). \
            Waiting for a sign-in has no such limit.

            With --json, a command prints JSON on stdout and a failure as one JSON object \
            on stderr, {"error": {"kind", "message", "exit_status", …}}, with the same exit \
            status; the schemas, which only ever gain members, are in docs/cli-json.md. \
            Shell completion: authctl --generate-completion-script bash|zsh|fish; it offers \
            config.toml's providers and resources.

            EXIT STATUS
            \(ExitStatus.helpTable)
            """,
        version: BrokerVersion.current,
        subcommands: [Login.self, Token.self, Status.self, Accounts.self, Whoami.self, UserInfo.self, Logout.self, SetSecret.self,
                      Exec.self, KubeCredential.self, GitCredential.self, SetupGit.self, Events.self, Headers.self, RenameProvider.self,
                      AWSCredentialProcess.self, SetupAWS.self, GcloudCredential.self, SetupGcloud.self,
                      Grants.self, Audit.self]
    )

    /// Plain `authctl token …` skips ArgumentParser's start-up (``TokenFastPath``);
    /// everything else is parsed as declared here, with suggestions for mistyped commands
    /// and JSON usage errors under --json (``CommandLineMistakes``).
    static func main() {
        TokenFastPath.runIfPlain(argc: CommandLine.argc, argv: CommandLine.unsafeArgv)
        CommandLineMistakes.run(Array(CommandLine.arguments.dropFirst()))
    }
}
