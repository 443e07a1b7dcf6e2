import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl login`: starts a sign-in in the daemon, shows the user what to open, waits.
struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to a provider.",
        discussion: """
            By default, the browser flow: authorization code with PKCE, the provider \
            redirecting back to authbrokerd on 127.0.0.1. authctl opens the page with \
            xdg-open in a desktop session and otherwise prints the URL; the sign-in times out \
            (5 minutes by default) if the browser never comes back.

            With --device, prints a URL and a code to enter there from any browser, on any \
            machine, then waits until the sign-in is approved, refused or expires.

              authctl login --login-hint alice@example.com --param acr_values=mfa
            """
    )

    @Option(help: "The provider's name in config.toml; may be left out when only one is configured.")
    var provider: String?

    @Flag(help: "Use the device authorization grant (RFC 8628): a code to enter in any browser.")
    var device = false

    @Option(help: "Pre-fill the sign-in page with this account (the login_hint parameter).")
    var loginHint: String?

    @Option(help: "The prompt parameter: none, login, consent or select_account.")
    var prompt: String?

    @Option(name: .customLong("param"), help: ArgumentHelp("An extra authorization parameter, as NAME=VALUE (repeatable).", valueName: "name=value"))
    var params: [String] = []

    @Flag(help: "Print the URL instead of opening a browser.")
    var noBrowser = false

    func validate() throws {
        for p in params where !p.contains("=") {
            throw ValidationError("--param takes NAME=VALUE, not \"\(p)\"")
        }
    }

    var extraParameters: [String: String]? {
        var extra: [String: String] = [:]
        for p in params {
            let kv = p.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            extra[String(kv[0])] = String(kv[1])
        }
        if let loginHint { extra["login_hint"] = loginHint }
        if let prompt { extra["prompt"] = prompt }
        return extra.isEmpty ? nil : extra
    }

    func run() throws {
        let params = LoginStartParams(provider: provider, flow: device ? "device" : "browser", params: extraParameters)
        let openBrowser = !noBrowser
        let account = try Broker.session { broker throws(ClientError) -> AccountInfo in
            let start = try broker.loginStart(params)
            for line in Self.instructions(for: start) { Output.note(line) }
            if let url = start.authorizationURL, openBrowser, Browser.open(url) {
                Output.note("(opened in your browser)")
            }
            // No timeout: the user takes the time they take; the daemon ends the wait
            // with an error when the sign-in expires.
            return try broker.loginWait(LoginWaitParams(loginID: start.loginID)).account
        }
        Output.line("Signed in to \(Output.safe(account.provider)) as \(Output.safe(account.shownName)).")
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
        case (nil, _) where start.authorizationURL != nil:
            lines.append("To sign in to \(provider), open this page in your browser:")
            lines.append(Output.safe(start.authorizationURL ?? ""))
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
