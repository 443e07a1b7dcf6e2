import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl logout`: revokes and forgets an account's refresh token.
struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign out: revoke the refresh token at the provider and remove it from the Secret Service.",
        discussion: """
            The account's cached access tokens are forgotten too. The local part happens \
            even when the provider cannot revoke the token; the output says which.
            """
    )

    @Option(help: "The provider's name in config.toml; may be left out when only one is configured.")
    var provider: String?

    @Option(help: "The account's username or subject; may be left out when the provider has one account.")
    var account: String?

    func run() throws {
        let params = LogoutParams(provider: provider, account: account)
        let result = try Broker.session { broker throws(ClientError) -> LogoutResult in
            try broker.logout(params)
        }
        Output.line(Self.summary(result))
    }

    static func summary(_ result: LogoutResult) -> String {
        let head = "Signed out of \(Output.safe(result.provider)) (\(Output.safe(result.account)))"
        if result.revoked {
            return head + "; the refresh token was revoked at the provider."
        }
        var note = Output.safe(result.revocationNote ?? "no reason given")
        if let last = note.last, !".!?".contains(last) { note += "." }
        return head + "; the provider could not revoke it: " + note
    }
}
