import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl aws-credentials`: the AWS SDKs' and CLI's `credential_process`.
struct AWSCredentialProcess: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aws-credentials",
        abstract: "Print temporary AWS credentials for a role, as credential_process JSON, from STS AssumeRoleWithWebIdentity with the account's ID token.",
        discussion: """
            authbrokerd asks STS for the role with the account's ID token (or, with \
            --audience, its access token for that audience) and keeps the credentials in \
            memory until shortly before they expire: later calls are answered without STS. \
            They are never written to a file. Prints {"Version": 1, "AccessKeyId", \
            "SecretAccessKey", "SessionToken", "Expiration"}, what credential_process \
            expects. `authctl setup-aws` writes the profile that runs it:

              [profile dev]
              credential_process = /usr/bin/authctl aws-credentials --role-arn arn:aws:iam::123456789012:role/dev

            The role's trust policy must trust the provider's IAM OIDC identity provider, \
            with the aud condition the client id (or the --audience), see \
            docs/integrations.md, "AWS". Defaults come from config.toml's [aws].
            """
    )

    @OptionGroup var aws: AWSRoleOptions

    func run() throws {
        let params = aws.params
        let result = try DaemonCall.session { broker throws(ClientError) -> AWSCredentialsResult in
            try broker.call(.awsCredentials, params, as: AWSCredentialsResult.self)
        }
        let process = ProcessCredentials(accessKeyId: result.accessKeyID, secretAccessKey: result.secretAccessKey,
                                         sessionToken: result.sessionToken, expiration: RFC3339.utc(result.expiresAt))
        do {
            Output.line(try Output.json(process))
        } catch {
            Output.error(error.description)
            throw ExitCode(ExitStatus.failure.rawValue)
        }
    }
}

/// What `aws-credentials` asks for, shared with `setup-aws`, which writes it into the profile.
struct AWSRoleOptions: ParsableArguments {
    @Option(name: .customLong("role-arn"), help: ArgumentHelp("The IAM role to assume, arn:aws:iam::ACCOUNT:role/NAME.", valueName: "arn"))
    var roleARN: String

    @OptionGroup var target: AccountOptions

    @Option(help: ArgumentHelp("Send the access token for this audience (a resource of the provider) instead of the ID token; default: config.toml's [aws] audience.", valueName: "audience"),
            completion: Completions.resource)
    var audience: String?

    @Flag(name: .customLong("id-token"), help: "Send the ID token, even when [aws] audience names an audience.")
    var idToken = false

    @Option(name: .customLong("session-policy"), help: ArgumentHelp("An inline session policy (IAM policy JSON) that narrows what the role grants.", valueName: "json"))
    var sessionPolicy: String?

    @Option(help: ArgumentHelp("Seconds the credentials live, 900 to 43200 (at most the role's maximum session duration); default: [aws] duration, else 3600.", valueName: "seconds"))
    var duration: Int?

    @Option(help: ArgumentHelp("The region whose STS endpoint is asked (sts.REGION.amazonaws.com); default: [aws] region, else the global endpoint.", valueName: "region"))
    var region: String?

    @Option(name: .customLong("sts-endpoint"), help: ArgumentHelp("The STS endpoint URL (https, or http on a loopback host only); default: [aws] sts_endpoint, else the region's.", valueName: "url"))
    var stsEndpoint: String?

    @Option(name: .customLong("role-session-name"), help: ArgumentHelp("STS's RoleSessionName (CloudTrail shows it); default: [aws] role_session_name, else the account's name.", valueName: "name"))
    var roleSessionName: String?

    func validate() throws {
        guard roleARN.hasPrefix("arn:"), roleARN.contains(":role/") else {
            throw ValidationError("--role-arn takes the ARN of an IAM role, e.g. arn:aws:iam::123456789012:role/dev")
        }
        if idToken, audience != nil {
            throw ValidationError("give either --audience (send its access token) or --id-token (send the ID token), not both")
        }
        if let duration, !(900...43_200).contains(duration) {
            throw ValidationError("--duration takes 900 to 43200 seconds (15 minutes to 12 hours)")
        }
        if let stsEndpoint, !(stsEndpoint.hasPrefix("https://") || stsEndpoint.hasPrefix("http://")) {
            throw ValidationError("--sts-endpoint takes a URL, e.g. https://sts.eu-west-1.amazonaws.com")
        }
    }

    var params: AWSCredentialsParams {
        AWSCredentialsParams(roleARN: roleARN, provider: target.provider, account: target.account, audience: audience,
                             idToken: idToken ? true : nil, sessionPolicy: sessionPolicy, durationSeconds: duration,
                             region: region, stsEndpoint: stsEndpoint, roleSessionName: roleSessionName)
    }

    /// `aws-credentials` with these options, as the profile's credential_process runs it.
    func arguments() -> [String] {
        var args = ["aws-credentials", "--role-arn", roleARN]
        if let provider = target.provider { args += ["--provider", provider] }
        if let account = target.account { args += ["--account", account] }
        if let audience { args += ["--audience", audience] }
        if idToken { args.append("--id-token") }
        if let sessionPolicy { args += ["--session-policy", sessionPolicy] }
        if let duration { args += ["--duration", String(duration)] }
        if let region { args += ["--region", region] }
        if let stsEndpoint { args += ["--sts-endpoint", stsEndpoint] }
        if let roleSessionName { args += ["--role-session-name", roleSessionName] }
        return args
    }
}

/// The AWS SDKs' process credentials (`credential_process`), version 1.
struct ProcessCredentials: Encodable {
    var version = 1
    var accessKeyId: String
    var secretAccessKey: String
    var sessionToken: String
    /// ISO 8601, UTC: `2024-05-01T12:00:00Z`.
    var expiration: String

    enum CodingKeys: String, CodingKey {
        case version = "Version"
        case accessKeyId = "AccessKeyId"
        case secretAccessKey = "SecretAccessKey"
        case sessionToken = "SessionToken"
        case expiration = "Expiration"
    }
}
