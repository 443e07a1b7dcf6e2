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
            return Self.table(result.accounts)
        }
        for line in lines { Output.line(line) }
    }

    static func table(_ accounts: [AccountInfo]) -> [String] {
        guard !accounts.isEmpty else {
            return ["No accounts: sign in with `authctl login`."]
        }
        let rows = accounts.map { account in
            [account.provider, account.shownName, account.subject, State.describe(account)].map(Output.safe)
        }
        return Output.table([["PROVIDER", "ACCOUNT", "SUBJECT", "STATE"]] + rows)
    }
}

/// An account's state as people read it.
enum State {
    /// `ready`, or `login_required (run `authctl login --provider P`)`.
    static func describe(_ account: AccountInfo) -> String {
        account.state == .loginRequired
            ? "login_required (run `authctl login --provider \(account.provider)`)"
            : account.state.rawValue
    }
}
