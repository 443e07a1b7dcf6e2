import ArgumentParser
import BrokerClient

/// `authctl setup-gcloud`: a Google Cloud credential configuration (external account)
/// whose subject token comes from `authctl gcloud-credential`.
struct SetupGcloud: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup-gcloud",
        abstract: "Write a Google Cloud credential configuration (workload or workforce identity federation) whose token comes from authctl gcloud-credential.",
        discussion: """
            Writes the external_account JSON that Google's auth libraries and gcloud read: \
            the audience (the workload identity pool provider, \
            //iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER), \
            the subject token type, Google's STS token_url, and credential_source.executable \
            running this authctl's `gcloud-credential` with the options given here. No \
            token is in it. Then:

              export GOOGLE_APPLICATION_CREDENTIALS=PATH GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1
              gcloud auth login --cred-file=PATH

            The pool provider's allowed audiences must list the provider's client id (the \
            ID token's aud), or the --resource whose access token is sent; see \
            docs/integrations.md, "Google Cloud". --output - prints the configuration.
            """
    )

    @Option(help: ArgumentHelp("The workload (or workforce) identity pool provider's audience, //iam.googleapis.com/….", valueName: "audience"))
    var audience: String

    @Option(help: ArgumentHelp("Where to write it; default: ~/.config/gcloud/authbroker-credentials.json; - prints it.", valueName: "path"))
    var output: String?

    @Option(name: .customLong("service-account-impersonation-url"), help: ArgumentHelp("Impersonate a service account: https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/EMAIL:generateAccessToken.", valueName: "url"))
    var serviceAccountImpersonationURL: String?

    @Option(name: .customLong("workforce-pool-user-project"), help: ArgumentHelp("For a workforce pool: the project billed for quota.", valueName: "project"))
    var workforcePoolUserProject: String?

    @Option(name: .customLong("token-url"), help: ArgumentHelp("Google's STS token endpoint; default https://sts.googleapis.com/v1/token.", valueName: "url"))
    var tokenURL = "https://sts.googleapis.com/v1/token"

    @OptionGroup var target: AccountOptions

    @Option(help: ArgumentHelp("Send the access token for this resource (a JWT) instead of the ID token.", valueName: "url"),
            completion: Completions.resource)
    var resource: String?

    @Flag(help: "Print what was done as JSON: file, audience, subject_token_type, command (docs/cli-json.md); with --output - the configuration itself.")
    var json = false

    @Option(name: .customLong("timeout-millis"), help: ArgumentHelp("How long the libraries let gcloud-credential run, 5000 to 120000 ms; default 30000.", valueName: "ms"))
    var timeoutMillis = 30_000

    func validate() throws {
        guard !audience.isEmpty, !audience.contains(where: \.isWhitespace) else {
            throw ValidationError("--audience takes the pool provider's audience, e.g. //iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/corp/providers/idp")
        }
        for (flag, url) in [("--token-url", tokenURL), ("--service-account-impersonation-url", serviceAccountImpersonationURL ?? "https://")] {
            guard url.hasPrefix("https://") || Self.isLoopbackHTTP(url) else {
                throw ValidationError("\(flag) must be an https URL (http only on a loopback host)")
            }
        }
        guard (5_000...120_000).contains(timeoutMillis) else {
            throw ValidationError("--timeout-millis takes 5000 to 120000, what Google's libraries allow")
        }
    }

    static func isLoopbackHTTP(_ url: String) -> Bool {
        ["http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:", "http://localhost/", "http://[::1]:", "http://[::1]/"].contains { url.hasPrefix($0) }
    }

    func run() throws {
        let text: String
        do {
            text = try Output.json(configurationFile())
        } catch {
            throw Failure.report(error.description, status: .failure, json: json)
        }
        if output == "-" { return Output.line(text) }
        guard let path = output ?? UserFiles.home().map({ $0 + "/.config/gcloud/authbroker-credentials.json" }) else {
            throw Failure.report("cannot find your home folder (HOME is not set): give the file with --output", status: .usage, json: json)
        }
        do throws(UserFileError) {
            try UserFiles.replace(path, with: text + "\n", mode: 0o600)
        } catch {
            throw Failure.report(error.sentence, status: .failure, json: json)
        }
        if json {
            let written = configurationFile()
            return Output.line(try Output.json(SetupGcloudReport(file: path, audience: written.audience, subjectTokenType: written.subjectTokenType,
                                                                 command: written.credentialSource.executable.command)))
        }
        let shown = Output.safe(path)
        Output.line("Wrote the credential configuration \(shown) (no token in it): `export GOOGLE_APPLICATION_CREDENTIALS=\(shown) GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1` for the client libraries, `gcloud auth login --cred-file=\(shown)` for gcloud.")
    }

    /// The `gcloud-credential` command line, with this authctl's own path.
    var command: String {
        var args = [Executable.ownPath(), "gcloud-credential"]
        if let provider = target.provider { args += ["--provider", provider] }
        if let account = target.account { args += ["--account", account] }
        if let resource { args += ["--resource", resource] }
        // Its own wait ends 5 s before the libraries would kill it.
        args += ["--timeout", String(max(1, timeoutMillis / 1000 - 5))]
        return GitHelperSetup.shellLine(args)
    }

    func configurationFile() -> ExternalAccountConfiguration {
        ExternalAccountConfiguration(
            audience: audience,
            subjectTokenType: resource == nil ? GcloudCredential.idTokenType : GcloudCredential.jwtType,
            tokenURL: tokenURL,
            serviceAccountImpersonationURL: serviceAccountImpersonationURL,
            workforcePoolUserProject: workforcePoolUserProject,
            credentialSource: .init(executable: .init(command: command, timeoutMillis: timeoutMillis)))
    }
}

/// Google's credential configuration of an external account, executable-sourced.
struct ExternalAccountConfiguration: Encodable {
    var type = "external_account"
    var audience: String
    var subjectTokenType: String
    var tokenURL: String
    var serviceAccountImpersonationURL: String?
    var workforcePoolUserProject: String?
    var credentialSource: CredentialSource

    struct CredentialSource: Encodable {
        var executable: ExecutableSource

        struct ExecutableSource: Encodable {
            var command: String
            var timeoutMillis: Int

            enum CodingKeys: String, CodingKey {
                case command
                case timeoutMillis = "timeout_millis"
            }
        }
    }

    enum CodingKeys: String, CodingKey {
        case type, audience
        case subjectTokenType = "subject_token_type"
        case tokenURL = "token_url"
        case serviceAccountImpersonationURL = "service_account_impersonation_url"
        case workforcePoolUserProject = "workforce_pool_user_project"
        case credentialSource = "credential_source"
    }
}

/// `authctl setup-gcloud --json`: the file written and what it makes the libraries run.
struct SetupGcloudReport: Encodable {
    var file: String
    var audience: String
    var subjectTokenType: String
    var command: String

    enum CodingKeys: String, CodingKey {
        case file, audience, command
        case subjectTokenType = "subject_token_type"
    }
}
