import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl token`: prints an access token, for `$(authctl token …)` in scripts.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an access token for a resource.",
        discussion: """
            By default only the token and a newline are printed, for \
            `curl -H "Authorization: Bearer $(authctl token --resource URL)"`. \
            Without --resource the token is for the provider's default audience, as the \
            provider decides; APIs that check the audience need --resource.
            """
    )

    @Option(help: ArgumentHelp("The API the token is for: an RFC 8707 resource indicator, e.g. https://api.example.com.", valueName: "url"))
    var resource: String?

    @Option(name: .customLong("scope"), help: ArgumentHelp("A scope to ask for (repeat, or separate with spaces); default: the provider's configured scopes.", valueName: "scope"))
    var scopes: [String] = []

    @Option(help: "The provider's name in config.toml; may be left out when only one is configured.")
    var provider: String?

    @Option(help: "The account's username or subject; may be left out when the provider has one account.")
    var account: String?

    @Option(name: .customLong("min-ttl"), help: ArgumentHelp("Seconds (0-86400) the token must still be valid for.", valueName: "seconds"))
    var minTTL: Int?

    @Flag(help: "Print the whole answer as JSON: access_token, token_type, expires_at, scope, resource, provider, account.")
    var json = false

    @Flag(help: "Print an HTTP header line: Authorization: Bearer <token>.")
    var header = false

    func validate() throws {
        if json && header {
            throw ValidationError("--json and --header cannot be used together: choose one")
        }
        if let minTTL, !(0...86_400).contains(minTTL) {
            throw ValidationError("--min-ttl must be between 0 and 86400 seconds")
        }
        if let resource, resource.isEmpty {
            throw ValidationError("--resource needs a URL, e.g. https://api.example.com")
        }
    }

    func run() throws {
        let params = TokenGetParams(
            resource: resource,
            scopes: scopeList.isEmpty ? nil : scopeList,
            provider: provider,
            account: account,
            minTTL: minTTL
        )
        try Self.printToken(params, json: json, header: header)
    }

    /// Gets the token and prints it as asked: the whole command once its arguments are
    /// known, shared by `run()` and ``TokenFastPath``.
    static func printToken(_ params: TokenGetParams, json: Bool, header: Bool) throws(ExitCode) {
        let text = try Broker.session { broker throws(ClientError) -> String in
            let result = try broker.token(params)
            // RFC 6749 A.12: an access token is printable ASCII. Anything else (a newline
            // above all) would break the header line or the shell word it is put in.
            guard !result.accessToken.isEmpty,
                  result.accessToken.utf8.allSatisfy({ (0x20...0x7E).contains($0) })
            else {
                throw .badResponse("the access token is empty or holds characters outside printable ASCII")
            }
            if json { return try Output.json(result) }
            if header { return "Authorization: Bearer " + result.accessToken }
            return result.accessToken
        }
        Output.line(text)
    }

    /// `--scope "a b" --scope c` → `["a", "b", "c"]`: a scope never contains a space.
    private var scopeList: [String] {
        Self.scopeList(scopes)
    }

    static func scopeList(_ scopes: [String]) -> [String] {
        scopes.flatMap { $0.split(separator: " ").map(String.init) }
    }
}
