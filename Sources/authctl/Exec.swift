#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl exec`: runs a command with a fresh token in its environment.
struct Exec: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a command with an access token in its environment.",
        discussion: """
            Gets a token, puts it in the environment variable named by --env \
            (default AUTHBROKER_TOKEN), and replaces authctl with the command, so the exit \
            status is the command's own. The token is never on a command line, where other \
            users could see it in ps.

              authctl exec --resource https://api.example.com -- ./deploy.sh --prod
              authctl exec --resource https://api.example.com -- \\
                  sh -c 'curl -H "Authorization: Bearer $AUTHBROKER_TOKEN" URL'

            AUTHBROKER_TOKEN_TYPE gets the token's type: Bearer, or DPoP for a provider \
            with dpop on. A DPoP token needs a proof with every request: with --url (and \
            --method) AUTHBROKER_DPOP gets one proof for that one request; a command that \
            makes more requests asks `authctl token --header --method M --url U` for each.

            The token is fetched once, before the command starts: for long-running commands \
            ask for enough life with --min-ttl. If the command cannot be started, the exit \
            status is 127 (not found) or 126 (not executable), as in the shell.
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var proof: ProofOptions

    @Option(help: ArgumentHelp("The environment variable that gets the token.", valueName: "name"))
    var env = "AUTHBROKER_TOKEN"

    @Argument(parsing: .postTerminator, help: ArgumentHelp("The command and its arguments, after --.", valueName: "command"))
    var command: [String] = []

    /// The command line without the `--` that separates it from authctl's options.
    private var commandLine: [String] {
        command.first == "--" ? Array(command.dropFirst()) : command
    }

    func validate() throws {
        guard let first = env.unicodeScalars.first,
              first == "_" || (first.isASCII && first.properties.isAlphabetic),
              env.unicodeScalars.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) })
        else {
            throw ValidationError("--env must be a variable name: letters, digits and _, not starting with a digit")
        }
        if commandLine.isEmpty {
            throw ValidationError("no command given: put it after --, e.g. authctl exec --resource URL -- curl …")
        }
    }

    func run() throws {
        let result: TokenGetResult
        if let request = proof.params(token.params()) {
            let answer = try Broker.session { broker throws(ClientError) -> DPoPProofResult in
                let answer = try broker.dpopProof(request)
                try Broker.checkPrintable(answer.token)
                return answer
            }
            result = answer.token
            setenv("AUTHBROKER_DPOP", answer.proof, 1)
        } else {
            result = try Broker.printableToken(token.params())
        }
        setenv(env, result.accessToken, 1)
        setenv("AUTHBROKER_TOKEN_TYPE", result.tokenType, 1)
        let argv = commandLine
        // execvp returns only on failure.
        let pointers = argv.map { strdup($0) } + [nil]
        execvp(argv[0], pointers)
        let error = errno
        pointers.forEach { free($0) }
        let notFound = error == ENOENT || error == ENOTDIR
        Output.error("cannot run \(Output.safe(argv[0])): \(String(cString: strerror(error))): "
            + (notFound ? "check the command's name and PATH" : "check that it is an executable file"))
        throw ExitCode(notFound ? 127 : 126)
    }
}
