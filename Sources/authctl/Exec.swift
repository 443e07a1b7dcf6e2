#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser

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

            The token is fetched once, before the command starts: for long-running commands \
            ask for enough life with --min-ttl. If the command cannot be started, the exit \
            status is 127 (not found) or 126 (not executable), as in the shell.
            """
    )

    @OptionGroup var token: TokenOptions

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
        let result = try Broker.printableToken(token.params())
        setenv(env, result.accessToken, 1)
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
