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

            authctl cannot see the command's HTTP answers, so it cannot tell on its own that \
            an API refused the token. Have the command exit with a status of your choice on \
            HTTP 401 and name it with --retry-on-exit: authctl then waits for the command \
            (instead of becoming it), and when it exits with that status tells the daemon \
            the token was refused, gets a new one and runs the command once more.

              authctl exec --resource https://api.example.com --retry-on-exit 77 -- \\
                  sh -c 'test "$(curl -s -o out.json -w "%{http_code}" \\
                      -H "Authorization: Bearer $AUTHBROKER_TOKEN" URL)" != 401 || exit 77'
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var proof: ProofOptions

    @Option(help: ArgumentHelp("The environment variable that gets the token.", valueName: "name"))
    var env = "AUTHBROKER_TOKEN"

    @Option(name: .customLong("retry-on-exit"), help: ArgumentHelp("An exit status (1-255) by which the command says the API refused its token: authctl then drops the token, gets a new one and runs the command once more.", valueName: "status"))
    var retryOnExit: Int32?

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
        if let retryOnExit, !(1...255).contains(retryOnExit) {
            throw ValidationError("--retry-on-exit must be an exit status between 1 and 255")
        }
        if commandLine.isEmpty {
            throw ValidationError("no command given: put it after --, e.g. authctl exec --resource URL -- curl …")
        }
    }

    func run() throws {
        let params = token.params()
        let handedOut = try provide(params, rejecting: nil)
        let argv = commandLine
        let pointers = argv.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        if let retryOnExit {
            let status = try runAndWait(pointers)
            guard status == retryOnExit else { throw ExitCode(status) }
            try provide(params, rejecting: handedOut)
        }
        // execvp returns only on failure.
        execvp(argv[0], pointers)
        throw cannotRun(argv[0], errno)
    }

    /// Gets the token (with --url, and its DPoP proof), puts it in the environment and
    /// returns it. `refused`, the token the command was given, is first dropped from the
    /// daemon's cache: by the token itself, not its key, so a newer token another program
    /// got for the key meanwhile is kept and served.
    @discardableResult
    private func provide(_ params: TokenGetParams, rejecting refused: String?) throws(ExitCode) -> String {
        let result = try DaemonCall.session { broker throws(ClientError) -> TokenGetResult in
            if let refused { _ = try broker.rejectToken(TokenRejectParams(accessToken: refused)) }
            if let request = proof.params(params) {
                let answer = try SignInOnDemand.retrying(broker, params, wait: token.waitForSignIn) { () throws(ClientError) in
                    try broker.dpopProof(request)
                }
                try DaemonCall.checkPrintable(answer.token)
                setenv("AUTHBROKER_DPOP", answer.proof, 1)
                return answer.token
            }
            let result = try SignInOnDemand.retrying(broker, params, wait: token.waitForSignIn) { () throws(ClientError) in
                try broker.token(params)
            }
            try DaemonCall.checkPrintable(result)
            return result
        }
        setenv(env, result.accessToken, 1)
        setenv("AUTHBROKER_TOKEN_TYPE", result.tokenType, 1)
        return result.accessToken
    }

    /// Runs the command as a child and returns its exit status (128 + N for a signal N),
    /// ignoring SIGINT and SIGQUIT meanwhile as a shell does: they are the command's to handle.
    private func runAndWait(_ pointers: [UnsafeMutablePointer<CChar>?]) throws(ExitCode) -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGQUIT)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        let previousInt = signal(SIGINT, SIG_IGN)
        let previousQuit = signal(SIGQUIT, SIG_IGN)
        defer {
            signal(SIGINT, previousInt)
            signal(SIGQUIT, previousQuit)
        }
        var pid = pid_t()
        let spawned = posix_spawnp(&pid, commandLine[0], nil, &attributes, pointers, environ)
        guard spawned == 0 else { throw cannotRun(commandLine[0], spawned) }
        return Executable.wait(for: pid) ?? 126
    }

    private func cannotRun(_ command: String, _ error: Int32) -> ExitCode {
        let notFound = error == ENOENT || error == ENOTDIR
        Output.error("cannot run \(Output.safe(command)): \(String(cString: strerror(error))): "
            + (notFound ? "check the command's name and PATH" : "check that it is an executable file"))
        return ExitCode(notFound ? 127 : 126)
    }
}
