#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient

/// `authctl setup-git`: makes git ask `authctl git-credential` for one host's credentials.
struct SetupGit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup-git",
        abstract: "Configure git (its global config) to get a host's HTTPS credentials from authctl git-credential.",
        discussion: """
            Sets credential.<url>.helper for the one host the resource is on, so git asks \
            authctl only for that server: first an empty value, which makes git ignore \
            helpers configured before it (a stored password for the host), then the helper \
            itself, with this authctl's full path. Running it again replaces what it wrote; \
            --unset removes the host's helpers. --dry-run prints the git commands instead.

              authctl setup-git --resource https://git.example.com
              authctl setup-git --host github.example.com --username x-access-token
            """
    )

    @Option(help: ArgumentHelp("The resource git's token is for; git asks authctl for its host.", valueName: "url"),
            completion: Completions.resource)
    var resource: String?

    @Option(help: ArgumentHelp("Instead of --resource: the host (host[:port]) of an https remote; its token is for https://HOST.", valueName: "host"))
    var host: String?

    @OptionGroup var target: AccountOptions

    @Option(help: "The username git sends with the token (git-credential's default: oauth2).")
    var username: String?

    @Flag(help: "Print the git commands instead of running them.")
    var dryRun = false

    @Flag(help: "Remove the host's credential helpers instead.")
    var unset = false

    @Flag(help: "Print what was done as JSON: url, config_key, helper, action, dry_run, commands (docs/cli-json.md).")
    var json = false

    func validate() throws {
        guard (resource == nil) != (host == nil) else {
            throw ValidationError("give either --resource URL or --host HOST, e.g. --resource https://git.example.com")
        }
        if let host, host.isEmpty || host.contains("/") || host.contains("@") || host.contains(where: \.isWhitespace) {
            throw ValidationError("--host takes a host name with an optional port, e.g. git.example.com:8443, not a URL")
        }
        if let resource, GitHelperSetup.origin(of: resource) == nil {
            throw ValidationError("--resource must be an https URL (or http to localhost), e.g. https://git.example.com, "
                + "since authctl git-credential answers for nothing else")
        }
    }

    func run() throws {
        let url = resource.flatMap(GitHelperSetup.origin(of:)) ?? "https://\(host ?? "")"
        let setup = GitHelperSetup(url: url, helper: GitHelperSetup.helper(
            resource: resource ?? url, provider: target.provider, account: target.account, username: username))
        let commands = unset ? setup.unsetCommands : setup.setCommands
        if !dryRun {
            for argv in commands {
                let status = Executable.run(argv)
                // `--unset-all` of a key that is not there exits 5: nothing to remove.
                guard status == 0 || (status == 5 && argv.contains("--unset-all")) else {
                    let why = status == 127 ? "git was not found: install git, or put it on PATH"
                        : "`\(GitHelperSetup.shellLine(argv))` failed with status \(status): fix what git said above and run this again"
                    throw Failure.report(why, status: .failure, json: json)
                }
            }
        }
        if json {
            return Output.line(try Output.json(GitSetupReport(setup: setup, action: unset ? "unset" : "set", dryRun: dryRun, commands: commands)))
        }
        if dryRun {
            return Output.line(commands.map(GitHelperSetup.shellLine).joined(separator: "\n"))
        }
        Output.line(unset
            ? "git no longer asks authctl for credentials for \(Output.safe(url)) (\(setup.key) removed from your global git config)."
            : "git now asks authctl for credentials for \(Output.safe(url)) (\(setup.key) in your global git config).")
    }
}

/// The credential helper configuration for one host.
struct GitHelperSetup {
    /// `https://host[:port]`: what git matches a remote's URL against.
    var url: String
    /// The helper's command line, `!'/path/authctl' git-credential --resource '…'`.
    var helper: String

    var key: String { "credential.\(url).helper" }

    /// Replaces the host's helpers: the empty value resets the helper list git built from
    /// the config read before (a global `credential.helper=store`, say).
    var setCommands: [[String]] {
        [["git", "config", "--global", "--unset-all", key],
         ["git", "config", "--global", "--add", key, ""],
         ["git", "config", "--global", "--add", key, helper]]
    }

    var unsetCommands: [[String]] {
        [["git", "config", "--global", "--unset-all", key]]
    }

    /// `scheme://authority` of an https URL (or http to a loopback host), else nil.
    static func origin(of resource: String) -> String? {
        guard let authority = GitCredentialRequest.authority(of: resource) else { return nil }
        let scheme = resource.prefix { $0 != ":" }.lowercased()
        let loopback = ["localhost", "127.0.0.1", "[::1]"].contains(GitCredentialRequest.hostName(authority).lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else { return nil }
        return "\(scheme)://\(authority.lowercased())"
    }

    /// The helper git runs through the shell, with this authctl's own path so that git
    /// finds it whatever PATH git runs with.
    static func helper(resource: String, provider: String?, account: String?, username: String?,
                       executable: String = Executable.ownPath()) -> String {
        var words = [executable, "git-credential", "--resource", resource]
        if let provider { words += ["--provider", provider] }
        if let account { words += ["--account", account] }
        if let username { words += ["--username", username] }
        return "!" + shellLine(words)
    }

    /// Words as a POSIX shell reads them back: plain when safe, else in single quotes.
    static func shellLine(_ words: [String]) -> String {
        words.map { word in
            let plain = !word.isEmpty && word.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_./:=@%+,".unicodeScalars.contains($0))
            }
            return plain ? word : "'" + word.replacing("'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}

/// `authctl setup-git --json`.
struct GitSetupReport: Encodable {
    var setup: GitHelperSetup
    var action: String
    var dryRun: Bool
    var commands: [[String]]

    enum CodingKeys: String, CodingKey {
        case url, helper, action, commands
        case configKey = "config_key"
        case dryRun = "dry_run"
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(setup.url, forKey: .url)
        try c.encode(setup.key, forKey: .configKey)
        try c.encode(setup.helper, forKey: .helper)
        try c.encode(action, forKey: .action)
        try c.encode(dryRun, forKey: .dryRun)
        try c.encode(commands, forKey: .commands)
    }
}
