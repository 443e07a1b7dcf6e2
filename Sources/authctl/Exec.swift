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
            HTTP 401 and name it with --retry-on-exit: authctl then runs the command as a \
            child and waits (instead of becoming it), and when it exits with that status \
            tells the daemon the token was refused, gets a new one and runs the command once \
            more, passing on the exit status of that run (128+N for a signal N, as a shell \
            reports it).

              authctl exec --resource https://api.example.com --retry-on-exit 77 -- \\
                  sh -c 'test "$(curl -s -o out.json -w "%{http_code}" \\
                      -H "Authorization: Bearer $AUTHBROKER_TOKEN" URL)" != 401 || exit 77'

            With --retry-on-exit the command may also say why: AUTHBROKER_CHALLENGE_FILE \
            names an empty file (mode 0600, in $XDG_RUNTIME_DIR; --challenge-file names \
            another) where it writes the refusal's WWW-Authenticate value, or its headers as \
            `curl -D FILE` writes them. authctl then does what the challenge asks, as the \
            client libraries do: invalid_token, a fresh token; insufficient_scope with scope, \
            a token for those scopes and the token's; a 401 naming resource_metadata, \
            discovery of --resource there, then a token from the server it names; \
            use_dpop_nonce (with --url), a proof with the DPoP-Nonce. A challenge no retry \
            helps is printed and the command's status passed on; insufficient_user_authentication \
            (RFC 9470) prints the `authctl login --resource URL --param acr_values=…` to run \
            and exits 4. When the retry exits with the status too, authctl prints what the \
            server said then. The file is removed when the command is done.

              authctl exec --resource https://api.example.com --retry-on-exit 77 -- \\
                  sh -c 'case "$(curl -s -D "$AUTHBROKER_CHALLENGE_FILE" -o out.json \\
                      -w "%{http_code}" -H "Authorization: Bearer $AUTHBROKER_TOKEN" URL)" \\
                      in 401|403) exit 77;; esac'
            """
    )

    @OptionGroup var token: TokenOptions

    @OptionGroup var proof: ProofOptions

    @Option(help: ArgumentHelp("The environment variable that gets the token.", valueName: "name"))
    var env = "AUTHBROKER_TOKEN"

    @Option(name: .customLong("retry-on-exit"), help: ArgumentHelp("An exit status (1-255) by which the command says the API refused its token: authctl then does what the challenge the command wrote to $AUTHBROKER_CHALLENGE_FILE asks (without one: drops the token and gets a new one) and runs the command once more.", valueName: "status"))
    var retryOnExit: Int32?

    @Option(name: .customLong("challenge-file"), help: ArgumentHelp("With --retry-on-exit: the file the command writes the refusal's WWW-Authenticate value (or its curl -D headers) to, instead of a new one in $XDG_RUNTIME_DIR; AUTHBROKER_CHALLENGE_FILE names it either way. Removed before each run and after.", valueName: "path"))
    var challengeFile: String?

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
        if challengeFile != nil, retryOnExit == nil {
            throw ValidationError("--challenge-file needs --retry-on-exit: the status by which the command says it was refused")
        }
        if let challengeFile, challengeFile.isEmpty {
            throw ValidationError("--challenge-file needs a path")
        }
        if commandLine.isEmpty {
            throw ValidationError("no command given: put it after --, e.g. authctl exec --resource URL -- curl …")
        }
    }

    func run() throws {
        let params = token.params()
        let argv = commandLine
        let pointers = argv.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        guard let retryOnExit else {
            try provide(params)
            // execvp returns only on failure.
            execvp(argv[0], pointers)
            throw cannotRun(argv[0], errno)
        }
        let file = try ChallengeFile(path: challengeFile)
        defer { file.remove() }
        let handedOut = try provide(params)
        let status = try runAndWait(pointers)
        guard status == retryOnExit else { throw ExitCode(status) }
        let (plan, reason) = ExecChallenge.plan(file.take(), token: handedOut, params: params, url: proof.url)
        var again = params
        var nonce = proof.nonce
        var before: ((BrokerConnection) throws(ClientError) -> Void)?
        switch plan {
        case .stop(let sentence):
            Output.error(sentence)
            throw ExitCode(status)
        case .signIn(let sentence):
            Output.error(sentence)
            throw ExitCode(ExitStatus.loginRequired.rawValue)
        case .newToken:
            before = { broker throws(ClientError) in _ = try broker.rejectToken(TokenRejectParams(accessToken: handedOut.accessToken)) }
        case .moreScopes(let scopes):
            again.scopes = scopes
        case .discover(let resourceMetadata):
            before = { broker throws(ClientError) in
                _ = try broker.call(.discoveryResolve, DiscoveryResolveParams(resource: params.resource ?? "", resourceMetadata: resourceMetadata),
                                    as: DiscoveryResolveResult.self)
                _ = try broker.rejectToken(TokenRejectParams(accessToken: handedOut.accessToken))
            }
        case .nonce(let value):
            nonce = value
        }
        let retried = try provide(again, nonce: nonce, before: before, refused: reason)
        try file.reset()
        let last = try runAndWait(pointers)
        if last == retryOnExit {
            Output.error(ExecChallenge.refusedAgain(file.take(), status: last, after: plan, url: proof.url,
                                                    dpop: retried.tokenType.lowercased() == "dpop"))
        }
        throw ExitCode(last)
    }

    /// Gets the token (with --url, and its DPoP proof carrying `nonce`), puts it in the
    /// environment and returns it. `before` runs first on the same connection: for a retry,
    /// `token.reject` of the token the command was given (by the token itself, not its key,
    /// so a newer token another program got for the key meanwhile is kept and served), or
    /// `discovery.resolve`. `refused`, the sentence of the refusal a retry answers, is
    /// printed before a failure of the daemon's.
    @discardableResult
    private func provide(_ params: TokenGetParams, nonce: String? = nil,
                         before: ((BrokerConnection) throws(ClientError) -> Void)? = nil,
                         refused: String? = nil) throws(ExitCode) -> TokenGetResult {
        let outcome = DaemonCall.attempt { broker throws(ClientError) -> TokenGetResult in
            try before?(broker)
            if var request = proof.params(params) {
                request.nonce = nonce ?? request.nonce
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
        let result: TokenGetResult
        switch outcome {
        case .success(let got):
            result = got
        case .failure(let error):
            if let refused { Output.error(refused) }
            throw Failure.report(error, json: false)
        }
        setenv(env, result.accessToken, 1)
        setenv("AUTHBROKER_TOKEN_TYPE", result.tokenType, 1)
        return result
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

/// The file a command run by `authctl exec --retry-on-exit` writes its refusal's
/// `WWW-Authenticate` value (or headers) to: `--challenge-file`, else a new one (mode 0600)
/// in `$XDG_RUNTIME_DIR` (else `$TMPDIR`, /tmp). `AUTHBROKER_CHALLENGE_FILE` names it to
/// the command; it is emptied before the retry and removed when the command is done.
struct ChallengeFile {
    static let variable = "AUTHBROKER_CHALLENGE_FILE"
    /// More than any WWW-Authenticate header, or a response's headers, holds.
    static let maxBytes = 64 << 10

    let path: String

    init(path given: String?) throws(ExitCode) {
        if let given {
            path = given
            try prepare()
        } else {
            let folder = [getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR")].lazy.compactMap { $0.map { String(cString: $0) } }
                .first { !$0.isEmpty } ?? "/tmp"
            var template = Array((folder + "/authctl-challenge-XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else { throw Self.failure("a challenge file in \(folder)", errno) }
            close(fd)
            path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        }
        setenv(Self.variable, path, 1)
    }

    private static func failure(_ what: String, _ error: Int32) -> ExitCode {
        Output.error("cannot create \(Output.safe(what)): \(String(cString: strerror(error))): "
            + "check that its folder exists and is yours, or name another with --challenge-file")
        return ExitCode(ExitStatus.failure.rawValue)
    }

    /// An empty file of the user's alone at `path`, whatever was there.
    private func prepare() throws(ExitCode) {
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.failure("the challenge file \(path)", errno) }
        close(fd)
    }

    /// Empties the file for the retry.
    func reset() throws(ExitCode) { try prepare() }

    /// What the command wrote; nil when nothing (or the file is gone, or no plain file).
    func take() -> WrittenChallenge? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count < Self.maxBytes {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[..<n]
        }
        return WrittenChallenge.read(String(decoding: bytes.prefix(Self.maxBytes), as: UTF8.self))
    }

    func remove() { unlink(path) }
}
