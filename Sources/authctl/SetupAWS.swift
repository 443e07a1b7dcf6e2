import ArgumentParser
import BrokerClient

/// `authctl setup-aws`: an AWS profile whose credentials come from `authctl aws-credentials`.
struct SetupAWS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup-aws",
        abstract: "Write an AWS profile (~/.aws/config) whose credential_process is authctl aws-credentials for a role.",
        discussion: """
            Sets the profile's credential_process to this authctl's full path with \
            `aws-credentials` and the options given here, and its region with --region; \
            other settings of the profile stay. Settings that would take precedence over \
            credential_process (role_arn, web_identity_token_file, sso_*) and static keys are \
            removed. No secret is written: the credentials stay in authbrokerd's memory. \
            The file is $AWS_CONFIG_FILE, else ~/.aws/config; --dry-run prints the profile \
            instead.

              authctl setup-aws --role-arn arn:aws:iam::123456789012:role/dev --profile dev --region eu-west-1
              aws --profile dev sts get-caller-identity
            """
    )

    @OptionGroup var aws: AWSRoleOptions

    @Option(help: ArgumentHelp("The profile's name (`default` for the default profile).", valueName: "name"))
    var profile: String

    @Option(name: .customLong("config-file"), help: ArgumentHelp("The AWS config file; default: $AWS_CONFIG_FILE, else ~/.aws/config.", valueName: "path"))
    var configFile: String?

    @Flag(help: "Print the profile instead of writing it.")
    var dryRun = false

    @Flag(help: "Print what was done as JSON: profile, file, credential_process, region, removed, warnings, dry_run (docs/cli-json.md).")
    var json = false

    func validate() throws {
        guard !profile.isEmpty, !profile.contains(where: { $0 == "[" || $0 == "]" || $0.isNewline }) else {
            throw ValidationError("--profile takes a profile name such as dev, without brackets")
        }
    }

    func run() throws {
        let command = GitHelperSetup.shellLine([Executable.ownPath()] + aws.arguments())
        var values = [("credential_process", command)]
        if let region = aws.region { values.append(("region", region)) }
        let path = configFile ?? UserFiles.environment("AWS_CONFIG_FILE") ?? UserFiles.home().map({ $0 + "/.aws/config" })
        var report = SetupAWSReport(profile: profile, file: path, credentialProcess: command, region: aws.region, dryRun: dryRun)
        if dryRun {
            if json { return Output.line(try Output.json(report)) }
            return Output.line(([AWSConfigFile.header(profile)] + values.map { "\($0.0) = \($0.1)" }).joined(separator: "\n"))
        }
        guard let path else {
            throw Failure.report("cannot find your home folder (HOME is not set): give the file with --config-file", status: .usage, json: json)
        }
        do throws(UserFileError) {
            var file = AWSConfigFile(text: try UserFiles.read(path) ?? "")
            report.removed = file.set(profile: profile, values)
            try UserFiles.replace(path, with: file.text)
        } catch {
            throw Failure.report(error.sentence, status: .failure, json: json)
        }
        if !report.removed.isEmpty {
            report.warnings.append("removed \(report.removed.joined(separator: ", ")) from the profile: they would have been used instead of credential_process")
        }
        if let shadowing = credentialsFileShadowing() { report.warnings.append(shadowing) }
        if json { return Output.line(try Output.json(report)) }
        Output.line("The AWS profile \(Output.safe(profile)) in \(Output.safe(path)) now gets credentials for \(Output.safe(aws.roleARN)) from authctl: try `aws --profile \(Output.safe(profile)) sts get-caller-identity`.")
        for warning in report.warnings { Output.note("authctl: " + Output.safe(warning)) }
    }

    /// The shared credentials file's keys for the profile come before credential_process.
    private func credentialsFileShadowing() -> String? {
        guard let path = UserFiles.environment("AWS_SHARED_CREDENTIALS_FILE") ?? UserFiles.home().map({ $0 + "/.aws/credentials" }),
              let text = try? UserFiles.read(path), AWSConfigFile(text: text).hasCredentials(profile: profile)
        else { return nil }
        return "\(path) has keys for [\(profile)], which the AWS tools use before credential_process: remove that section for the profile to use authctl"
    }
}

/// `authctl setup-aws --json`: what was (or, with --dry-run, would be) written.
struct SetupAWSReport: Encodable {
    var profile: String
    var file: String?
    var credentialProcess: String
    var region: String?
    var removed: [String] = []
    var warnings: [String] = []
    var dryRun: Bool

    enum CodingKeys: String, CodingKey {
        case profile, file, region, removed, warnings
        case credentialProcess = "credential_process"
        case dryRun = "dry_run"
    }
}
