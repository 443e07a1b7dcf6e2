#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient
import BrokerProtocol

/// The options that choose a token, shared by `token` and the commands that hand one to
/// another program (`exec`, `kube-credential`, `git-credential`).
struct TokenOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The API the token is for: an RFC 8707 resource indicator, e.g. https://api.example.com.", valueName: "url"),
            completion: Completions.resource)
    var resource: String?

    @Option(name: .customLong("scope"), help: ArgumentHelp("A scope to ask for (repeat, or separate with spaces); default: the provider's configured scopes. The set must be one the provider's scope_sets lists (without it: made of its scopes), and under [[allow]] rules one the program's rule names.", valueName: "scope"))
    var scopes: [String] = []

    @OptionGroup var target: AccountOptions
    var provider: String? { target.provider }
    var account: String? { target.account }

    @Option(name: .customLong("min-ttl"), help: ArgumentHelp("Seconds (\(TokenGetParams.minTTLRange.lowerBound)-\(TokenGetParams.minTTLRange.upperBound)) the token must still be valid for.", valueName: "seconds"))
    var minTTL: Int?

    @Option(name: .customLong("param"), help: ArgumentHelp("An extra token request parameter, NAME=VALUE (repeat), e.g. organization_id=org-1; tokens with other parameters are other tokens. NAME must be in the provider's caller_params (and, under [[allow]] rules, the rule's params).", valueName: "name=value"))
    var extra: [String] = []

    @Flag(name: .customLong("wait-for-sign-in"), help: "When the account needs a sign-in, show its page and wait for it instead of failing: every program waiting shares the daemon's one sign-in.")
    var waitForSignIn = false

    func validate() throws {
        for pair in extra where !pair.contains("=") || pair.hasPrefix("=") {
            throw ValidationError("--param needs NAME=VALUE, e.g. --param organization_id=org-1")
        }
        let range = TokenGetParams.minTTLRange
        if let minTTL, !range.contains(minTTL) {
            throw ValidationError("--min-ttl must be between \(range.lowerBound) and \(range.upperBound) seconds")
        }
        if let resource, resource.isEmpty {
            throw ValidationError("--resource needs a URL, e.g. https://api.example.com")
        }
    }

    /// The request, with `resource` standing in when no --resource was given.
    func params(resource fallback: String? = nil) -> TokenGetParams {
        let list = Token.scopeList(scopes)
        var pairs: [String: String] = [:]
        for pair in extra {
            let name = pair.prefix { $0 != "=" }
            pairs[String(name)] = String(pair.dropFirst(name.count + 1))
        }
        return TokenGetParams(
            resource: resource ?? fallback, scopes: list.isEmpty ? nil : list,
            provider: provider, account: account, minTTL: minTTL, params: pairs.isEmpty ? nil : pairs,
            accountHint: account == nil ? Self.environmentAccount : nil)
    }

    /// `AUTHBROKER_ACCOUNT` from authctl's environment, sent as `account_hint`: the daemon
    /// uses it only where an account rule with `environment = true` allows it, and --account wins.
    static var environmentAccount: String? {
        guard let value = getenv("AUTHBROKER_ACCOUNT") else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }
}

extension DaemonCall {
    /// Gets a token and checks it can be handed on as a header, an environment value or a
    /// JSON string: RFC 6749 A.12 makes an access token printable ASCII.
    /// With `waitForSignIn`, an account that needs a sign-in gets one first (``SignInOnDemand``).
    static func printableToken(_ params: TokenGetParams, waitForSignIn: Bool = false) throws(ExitCode) -> TokenGetResult {
        try session { broker throws(ClientError) -> TokenGetResult in
            let result = try SignInOnDemand.retrying(broker, params, wait: waitForSignIn) { () throws(ClientError) in
                try broker.token(params)
            }
            try checkPrintable(result)
            return result
        }
    }

    /// Anything but printable ASCII (a newline above all) would break the header line, the
    /// environment value or the shell word the token is put in.
    static func checkPrintable(_ result: TokenGetResult) throws(ClientError) {
        // Over the contiguous bytes: through the UTF8View it is a call per byte of a JWT.
        var token = result.accessToken
        guard !token.isEmpty, token.withUTF8({ $0.allSatisfy { (0x20...0x7E).contains($0) } }) else {
            throw .badResponse("the access token is empty or holds characters outside printable ASCII")
        }
    }
}

/// The request a DPoP proof is for (`token`, `exec`).
struct ProofOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The URL of the request the token is sent with: also get a DPoP proof for it (providers with dpop on).", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("With --url: the request's HTTP method (default GET).", valueName: "method"))
    var method: String?

    @Option(help: ArgumentHelp("With --url: the DPoP-Nonce the server asked for.", valueName: "nonce"))
    var nonce: String?

    func validate() throws {
        if url == nil, method != nil || nonce != nil {
            throw ValidationError("--method and --nonce need --url: the request the DPoP proof is for")
        }
    }

    /// The `dpop.proof` request, or nil without --url.
    func params(_ token: TokenGetParams) -> DPoPProofParams? {
        url.map { DPoPProofParams(token: token, htm: (method ?? "GET").uppercased(), htu: $0, nonce: nonce) }
    }
}
