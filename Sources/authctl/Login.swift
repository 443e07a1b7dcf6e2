import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl login`: starts a sign-in in the daemon, shows the user what to open, waits.
struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to a provider.",
        discussion: """
            With --device, prints a URL and a code to enter there from any browser, on any \
            machine, then waits until the sign-in is approved, refused or expires. Without \
            it, asks for the browser flow (authorization code with PKCE); authbrokerd says \
            so when that flow is not available, and authctl does not switch flows by itself.
            """
    )

    @Option(help: "The provider's name in config.toml; may be left out when only one is configured.")
    var provider: String?

    @Flag(help: "Use the device authorization grant (RFC 8628): a code to enter in any browser.")
    var device = false

    func run() throws {
        let params = LoginStartParams(provider: provider, flow: device ? "device" : "browser")
        let account = try Broker.session { broker throws(ClientError) -> AccountInfo in
            let start = try broker.loginStart(params)
            for line in Self.instructions(for: start) { Output.note(line) }
            // No timeout: the user takes the time they take; the daemon ends the wait
            // with an error when the sign-in expires.
            return try broker.loginWait(LoginWaitParams(loginID: start.loginID)).account
        }
        Output.line("Signed in to \(Output.safe(account.provider)) as \(Output.safe(account.username ?? account.subject)).")
    }

    /// The lines on stderr that tell the user what to do.
    static func instructions(for start: LoginStartResult, now: Int64 = TimeText.now) -> [String] {
        let provider = Output.safe(start.provider)
        var lines: [String] = []
        switch (start.verificationURI.map(Output.safe), start.userCode.map(Output.safe)) {
        case let (uri?, code?):
            lines.append("To sign in to \(provider), open \(uri) and enter the code \(code)")
            if let complete = start.verificationURIComplete.map(Output.safe) {
                lines.append("(or open \(complete), which fills in the code)")
            }
        case let (uri?, nil):
            lines.append("To sign in to \(provider), open \(uri)")
        default:
            lines.append("Signing in to \(provider)…")
        }
        lines.append("This sign-in expires in \(remaining(until: start.expiresAt, now: now)); waiting for it to finish…")
        return lines
    }

    /// "15 minutes", "1 minute", "45 seconds".
    static func remaining(until expiresAt: Int64, now: Int64) -> String {
        let seconds = max(0, expiresAt - now)
        if seconds < 90 { return seconds == 1 ? "1 second" : "\(seconds) seconds" }
        let minutes = (seconds + 30) / 60
        return "\(minutes) minutes"
    }
}
