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

            For a provider with dpop on (docs/dpop.md) the token is bound to the daemon's \
            key and useless alone: give the request's --url (and --method) to get a DPoP \
            proof with it. --header then prints `Authorization: DPoP <token>` and \
            `DPoP: <proof>`; a proof is good for one request, and both lines must come \
            from one call:

              authctl token --header --method GET --url URL > headers && curl -H @headers URL

            When an API refuses a token it was given (HTTP 401), ask again with --fresh: \
            the daemon drops the cached token and refreshes, for providers that revoke \
            tokens early (docs/providers.md).

            --exchange-for AUDIENCE prints a token for a downstream service instead, \
            minted by the provider from the account's token (RFC 8693 token exchange; \
            the provider must offer it): --resource then names the service's URL (one of \
            the provider's resources in config.toml), --subject-token-type id_token \
            exchanges the ID token, and --requested-token-type asks for a type of token. \
            Under [[allow]] rules, the program's rule must grant both the audience and \
            the resource.

            With --wait-for-sign-in, an account that needs a sign-in does not fail: the \
            sign-in page is printed (and a desktop notification offers it), and the token \
            follows once the sign-in is done. Every program waiting so shares one sign-in.
            """
    )

    @OptionGroup var options: TokenOptions

    @Flag(help: "Print the whole answer as JSON: access_token, token_type, expires_at, scope, resource, provider, account.")
    var json = false

    @Flag(help: "Print HTTP header lines: Authorization: <token type> <token>, and with --url the DPoP: <proof> line.")
    var header = false

    @OptionGroup var proof: ProofOptions

    @Option(name: .customLong("exchange-for"), help: ArgumentHelp("Exchange the account's token for one for this audience (RFC 8693).", valueName: "audience"))
    var exchangeFor: String?

    @Option(name: .customLong("subject-token-type"), help: ArgumentHelp("With --exchange-for: the token exchanged, access_token (default) or id_token.", valueName: "type"))
    var subjectTokenType: String?

    @Option(name: .customLong("requested-token-type"), help: ArgumentHelp("With --exchange-for: the type of token wanted: access_token, id_token, jwt or a URN.", valueName: "type"))
    var requestedTokenType: String?

    @Flag(help: "Drop the cached token for this request first and get a new one: for when an API answered 401 to the token printed before.")
    var fresh = false

    func validate() throws {
        if json && header {
            throw ValidationError("--json and --header cannot be used together: choose one")
        }
        if exchangeFor == nil, subjectTokenType != nil || requestedTokenType != nil {
            throw ValidationError("--subject-token-type and --requested-token-type need --exchange-for AUDIENCE")
        }
        if exchangeFor != nil, proof.url != nil || fresh {
            throw ValidationError("--exchange-for cannot be used with --url or --fresh")
        }
        if exchangeFor?.isEmpty == true {
            throw ValidationError("--exchange-for needs the audience the new token is for")
        }
    }

    func run() throws {
        if let exchangeFor {
            let p = options.params()
            let request = TokenExchangeParams(
                audience: exchangeFor, resource: p.resource, scopes: p.scopes, provider: p.provider, account: p.account,
                subjectTokenType: subjectTokenType, requestedTokenType: requestedTokenType, minTTL: p.minTTL)
            let text = try DaemonCall.session(json: json) { broker throws(ClientError) -> String in
                let result = try broker.exchangeToken(request)
                try DaemonCall.checkPrintable(result)
                if json { return try Output.json(result) }
                if header { return "Authorization: \(result.tokenType) \(result.accessToken)" }
                return result.accessToken
            }
            return Output.line(text)
        }
        guard let request = proof.params(options.params()) else {
            return try Self.printToken(options.params(), json: json, header: header, fresh: fresh, waitForSignIn: options.waitForSignIn)
        }
        let text = try DaemonCall.session(json: json) { broker throws(ClientError) -> String in
            if fresh { _ = try broker.rejectToken(TokenRejectParams(key: options.params())) }
            let result = try SignInOnDemand.retrying(broker, options.params(), wait: options.waitForSignIn) { () throws(ClientError) in
                try broker.dpopProof(request)
            }
            try DaemonCall.checkPrintable(result.token)
            if json { return try Output.json(result) }
            if header { return "Authorization: \(result.token.tokenType) \(result.token.accessToken)\nDPoP: \(result.proof)" }
            return result.token.accessToken + "\n" + result.proof
        }
        Output.line(text)
    }

    /// Gets the token and prints it as asked: the whole command once its arguments are
    /// known, shared by `run()` and ``TokenFastPath``.
    static func printToken(_ params: TokenGetParams, json: Bool, header: Bool, fresh: Bool = false,
                           waitForSignIn: Bool = false) throws(ExitCode) {
        let text = try DaemonCall.session(json: json) { broker throws(ClientError) -> String in
            if fresh { _ = try broker.rejectToken(TokenRejectParams(key: params)) }
            let result = try SignInOnDemand.retrying(broker, params, wait: waitForSignIn) { () throws(ClientError) in
                try broker.token(params)
            }
            try DaemonCall.checkPrintable(result)
            if json { return try Output.json(result) }
            if header { return "Authorization: \(result.tokenType) \(result.accessToken)" }
            return result.accessToken
        }
        Output.line(text)
    }

    /// `--scope "a b" --scope c` → `["a", "b", "c"]`: a scope never contains a space.
    static func scopeList(_ scopes: [String]) -> [String] {
        scopes.flatMap { $0.split(separator: " ").map(String.init) }
    }
}
