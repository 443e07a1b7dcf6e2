import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl accounts`: the accounts authbrokerd knows and whether they can get tokens.
struct Accounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the signed-in accounts and their state (ready or login_required)."
    )

    @Flag(help: "Print authbrokerd's answer (account.list) as JSON.")
    var json = false

    func run() throws {
        let lines = try DaemonCall.session(json: json) { broker throws(ClientError) -> [String] in
            let result = try broker.accounts()
            if json { return [try Output.json(result)] }
            // Unreadable is not "none": a script must not take it for "sign in again".
            if result.accounts.isEmpty, let unreadable = result.storeUnreadable {
                throw .rpc(RPCError(.secretStoreUnavailable, "no account can be listed yet: \(unreadable)"))
            }
            return Self.table(result.accounts, storeUnreadable: result.storeUnreadable)
        }
        for line in lines { Output.line(line) }
    }

    static func table(_ accounts: [AccountInfo], storeUnreadable: String? = nil) -> [String] {
        guard !accounts.isEmpty else {
            if let storeUnreadable { return ["No accounts listed yet: \(Output.safe(storeUnreadable))."] }
            return ["No accounts: sign in with `authctl login`."]
        }
        let rows = accounts.map { account in
            [account.provider, account.shownName, account.subject, State.describe(account)].map(Output.safe)
        }
        var lines = Output.table([["PROVIDER", "ACCOUNT", "SUBJECT", "STATE"]] + rows)
        for account in accounts {
            if let unsaved = account.unsaved { lines.append("\(Output.safe(account.provider)) \(Output.safe(account.shownName)): \(Output.safe(unsaved)).") }
        }
        if let storeUnreadable { lines.append("More may follow: \(Output.safe(storeUnreadable)).") }
        return lines
    }
}

/// An account's state as people read it.
enum State {
    /// `ready`, or `login_required (run `authctl login --provider P`)`.
    static func describe(_ account: AccountInfo) -> String {
        if account.state == .loginRequired { return "login_required (run `authctl login --provider \(account.provider)`)" }
        if account.unsaved != nil { return "\(account.state.rawValue), not saved (\(account.unsavedReason ?? "pending"))" }
        return account.state.rawValue
    }
}
