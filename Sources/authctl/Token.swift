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

    @OptionGroup var options: TokenOptions

    @Flag(help: "Print the whole answer as JSON: access_token, token_type, expires_at, scope, resource, provider, account.")
    var json = false

    @Flag(help: "Print an HTTP header line: Authorization: Bearer <token>.")
    var header = false

    func validate() throws {
        if json && header {
            throw ValidationError("--json and --header cannot be used together: choose one")
        }
    }

    func run() throws {
        try Self.printToken(options.params(), json: json, header: header)
    }

    /// Gets the token and prints it as asked: the whole command once its arguments are
    /// known, shared by `run()` and ``TokenFastPath``.
    static func printToken(_ params: TokenGetParams, json: Bool, header: Bool) throws(ExitCode) {
        let text = try Broker.session { broker throws(ClientError) -> String in
            let result = try broker.token(params)
            try Broker.checkPrintable(result)
            if json { return try Output.json(result) }
            if header { return "Authorization: Bearer " + result.accessToken }
            return result.accessToken
        }
        Output.line(text)
    }

    /// `--scope "a b" --scope c` → `["a", "b", "c"]`: a scope never contains a space.
    static func scopeList(_ scopes: [String]) -> [String] {
        scopes.flatMap { $0.split(separator: " ").map(String.init) }
    }
}
