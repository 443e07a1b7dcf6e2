import ArgumentParser
import BrokerClient
import BrowserLaunch
import BrokerProtocol

/// `authctl logout`: revokes and forgets an account's refresh token.
struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign out: revoke the refresh token at the provider and remove it from the Secret Service.",
        discussion: """
            The account's cached access tokens are forgotten too. The local part happens \
            even when the provider cannot revoke the token; the output says which. The \
            provider's end-session URL, which ends its browser session, is printed (and \
            opened with $BROWSER or xdg-open) whether or not the revocation worked.
            """
    )

    @OptionGroup var target: AccountOptions
    var provider: String? { target.provider }
    var account: String? { target.account }

    @Flag(help: "Only forget the account here: no revocation, no provider session ended.")
    var local = false

    @Flag(help: "Do not open the provider's end-session URL in a browser (it is printed either way).")
    var noBrowser = false

    @Flag(help: "Print the result as JSON: provider, account, revoked, revocation_note, end_session_url, end_session_direct_url (docs/cli-json.md).")
    var json = false

    func run() throws {
        let params = LogoutParams(provider: provider, account: account, local: local ? true : nil)
        let result = try DaemonCall.session(json: json) { broker throws(ClientError) -> LogoutResult in
            try broker.logout(params)
        }
        Output.line(json ? try Output.json(result) : Self.summary(result))
        if let url = result.endSessionURL {
            // Printed in every case: revocation does not end the provider's browser
            // session, and an opener may report success without a browser showing it.
            Output.note("To end your session at \(Output.safe(result.provider)) too, open:")
            Output.note(Output.safe(url))
            if let direct = result.endSessionDirectURL {
                // The page above is on this computer's loopback address, good once for five minutes.
                Output.note("(that page, good once for 5 minutes, sends your sign-in's ID token as id_token_hint; from a browser on another computer open instead:)")
                Output.note(Output.safe(direct))
            }
            if !noBrowser, case .opened = Browser.open(url) {
                Output.note("(opened in your browser)")
            }
        }
    }

    static func summary(_ result: LogoutResult) -> String {
        let head = "Signed out of \(Output.safe(result.provider)) (\(Output.safe(result.account)))"
        if result.revoked {
            return head + "; the refresh token was revoked at the provider."
        }
        if result.revocationNote == "signed out locally only, as asked" {
            return head + " locally; the refresh token was not revoked."
        }
        var note = Output.safe(result.revocationNote ?? "no reason given")
        if let last = note.last, !".!?".contains(last) { note += "." }
        return head + "; the provider could not revoke it: " + note
    }
}
