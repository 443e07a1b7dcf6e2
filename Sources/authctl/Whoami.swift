import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl whoami`: the signed-in account's verified ID-token claims.
struct Whoami: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the signed-in account's ID-token claims (verified when the daemon received them).")

    @OptionGroup var options: ClaimsOptions

    func run() throws {
        try Claims.show(.accountWhoami, options)
    }
}

/// `authctl userinfo`: the provider's UserInfo answer for the account.
struct UserInfo: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "userinfo",
        abstract: "Ask the provider's UserInfo endpoint about the signed-in account, with a fresh access token.")

    @OptionGroup var options: ClaimsOptions

    func run() throws {
        try Claims.show(.accountUserinfo, options)
    }
}

/// Which account, and how to print its claims.
struct ClaimsOptions: ParsableArguments {
    @OptionGroup var target: AccountOptions
    var provider: String? { target.provider }
    var account: String? { target.account }

    @Flag(help: "Print the whole answer as JSON.")
    var json = false
}

/// Claims as `name: value` lines, sorted.
enum Claims {
    /// Asks `method` about the account and prints the claims.
    static func show(_ method: RPCMethod, _ options: ClaimsOptions) throws {
        let params = AccountParams(provider: options.provider, account: options.account,
                                   accountHint: options.account == nil ? TokenOptions.environmentAccount : nil)
        let json = options.json
        let text = try DaemonCall.session(json: json) { broker throws(ClientError) -> String in
            let result = try broker.call(method, params, as: ClaimsResult.self)
            guard !json else { return try Output.json(result) }
            // Which rule chose the account, when one did (not --account, not the only one).
            guard let by = result.chosenBy, by != "account param", by != "only account" else { return lines(result) }
            return lines(result) + "\n" + Output.safe("(account chosen by \(by))")
        }
        Output.line(text)
    }

    static func lines(_ result: ClaimsResult) -> String {
        let rows = result.claims.keys.sorted().map { [$0 + ":", text(result.claims[$0] ?? .null)] }
        return Output.table(rows).map(Output.safe).joined(separator: "\n")
    }

    static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let s): return s
        case .number(let n): return n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .array(let a): return a.map(text).joined(separator: ", ")
        case .object(let o): return "{" + o.keys.sorted().map { "\($0): \(text(o[$0] ?? .null))" }.joined(separator: ", ") + "}"
        }
    }
}
