import ArgumentParser
import BrokerClient
import BrokerProtocol
import BrowserLaunch
import Dispatch

/// `authctl login`: starts a sign-in in the daemon, shows the user what to open, waits.
struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to a provider.",
        discussion: """
            By default, the browser flow: authorization code with PKCE, the provider \
            redirecting back to authbrokerd on 127.0.0.1. authctl prints the URL and opens \
            it with the commands in $BROWSER (colon-separated; %s stands for the URL), or \
            with xdg-open in a desktop session; the sign-in times out (5 minutes by default) \
            if the browser never comes back. Ctrl-C cancels it in the daemon too.

            With --device, prints a URL and a code to enter there from any browser, on any \
            machine, then waits until the sign-in is approved, refused or expires. On a \
            terminal wide enough, a QR code of the URL follows, for a phone to open it with \
            the code filled in (--no-qr, or AUTHBROKER_NO_QR=1, leaves it out).

              authctl login --login-hint alice@example.com --param acr_values=mfa

            With --resource and no --provider, a resource that no configured provider \
            lists leads to the authorization server its metadata names (RFC 9728): the \
            first time, authctl shows the resource's host and the server's and asks \
            whether to trust it (--trust: without asking); then authbrokerd registers \
            itself as a client there and the sign-in goes on as for a configured \
            provider (docs/agents.md).

            With --resource, the sign-in asks for that one resource only; \
            repeat it for one sign-in per resource, one after the other. For providers that \
            narrow a rotated refresh token to one resource, set refresh_tokens = \
            "one-per-resource" in config.toml and sign in once per resource \
            (docs/providers.md):

              authctl login --resource https://api.example.com --resource https://git.example.com

            With --terminal, no browser: the daemon asks what the provider needs (user \
            name, password, one-time codes) and authctl asks you in the terminal; secrets \
            and codes are not echoed. Answers may also come line by line from a pipe. Needs \
            a provider with an authorization challenge endpoint (OAuth 2.0 for First-Party \
            Applications), or password_grant = true for it in config.toml (docs/sign-in.md).
            """
    )

    @OptionGroup var target: ProviderOption
    var provider: String? { target.provider }

    @Flag(help: "Use the device authorization grant (RFC 8628): a code to enter in any browser.")
    var device = false

    @Flag(help: "Sign in in the terminal, no browser: answer the provider's questions here (authorization challenge endpoint, or password_grant = true).")
    var terminal = false

    @Option(help: "Pre-fill the sign-in page with this account (the login_hint parameter).")
    var loginHint: String?

    @Option(help: "The prompt parameter: none, login, consent or select_account.")
    var prompt: String?

    @Option(name: .customLong("param"), help: ArgumentHelp("An extra authorization parameter, as NAME=VALUE (repeatable).", valueName: "name=value"))
    var params: [String] = []

    @Option(name: .customLong("resource"), help: ArgumentHelp("Sign in for this configured resource only (repeatable: one sign-in each).", valueName: "url"),
            completion: Completions.resource)
    var resources: [String] = []

    @Flag(help: "With --resource: trust the authorization server the resource's metadata names without asking (you have reviewed it).")
    var trust = false

    @Flag(help: "Print the URL instead of opening a browser.")
    var noBrowser = false

    @Flag(help: "Print JSON lines on stdout: login_started (the URL or code), then signed_in with the account (docs/cli-json.md).")
    var json = false

    @Flag(help: "No QR code beside the device sign-in's URL (also: AUTHBROKER_NO_QR=1).")
    var noQr = false

    func validate() throws {
        if terminal && device {
            throw ValidationError("--terminal and --device cannot be used together: choose one")
        }
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
        for resource in resources.isEmpty ? [nil] : resources.map(Optional.some) {
            // A resource with no provider named: its metadata may name one (RFC 9728).
            var provider = self.provider
            if provider == nil, let resource {
                provider = try DaemonCall.session(json: json) { broker throws(ClientError) in
                    try TrustQuestion.provider(for: resource, on: broker, trustWithoutAsking: trust)
                }
            }
            if let resource { Output.note("Signing in for \(Output.safe(resource))…") }
            if terminal {
                try signInHere(LoginStartParams(provider: provider, flow: .terminal, resource: resource))
                continue
            }
            try signIn(LoginStartParams(provider: provider, flow: device ? .device : .browser, params: extraParameters,
                                        resource: resource))
        }
    }

    /// With --json, the `login_started` line: what the user must open or type.
    private func announce(_ start: LoginStartResult) {
        guard json, let line = try? Output.json(Output.Beside(key: "event", value: "login_started", body: start), oneLine: true) else { return }
        Output.line(line)
    }

    /// The outcome: "Signed in to corp as alice.", or with --json the `signed_in` line.
    private func report(_ account: AccountInfo, resource: String?) throws {
        guard json else {
            Output.line("Signed in to \(Output.safe(account.provider)) as \(Output.safe(account.shownName)).")
            // What became of the refresh token of the sign-in this one replaced.
            if let replaced = account.replacedSignIn { Output.line(Output.safe(replaced.prefix(1).uppercased() + replaced.dropFirst()) + ".") }
            // The store refused it after the sign-in began: held in memory until it takes it.
            if let unsaved = account.unsaved { Output.note("Not saved yet: \(Output.safe(unsaved)).") }
            return
        }
        Output.line(try Output.json(Output.Beside(key: "event", value: "signed_in", body: SignedIn(account: account, resource: resource)), oneLine: true))
    }

    private struct SignedIn: Encodable {
        var account: AccountInfo
        var resource: String?
    }

    private func signIn(_ params: LoginStartParams) throws {
        let openBrowser = !noBrowser
        // Never with --json: whatever reads the JSON has no use for a picture on stderr.
        let showQR = !noQr && !json
        let account = try DaemonCall.session(json: json) { broker throws(ClientError) -> AccountInfo in
            let start = try broker.loginStart(params)
            // No timeout: the user takes the time they take; the daemon ends the wait
            // with an error when the sign-in expires. The instructions follow the wait's
            // request, so that Ctrl-C at any point after them cancels the sign-in too.
            let done = try broker.loginWait(LoginWaitParams(loginID: start.loginID)) {
                announce(start)
                let qr = DeviceQR.lines(for: start, enabled: showQR)
                for line in Self.instructions(for: start, qr: qr) { Output.note(line) }
                guard let url = start.authorizationURL else { return }
                if openBrowser {
                    switch Browser.open(url) {
                    case .opened(let command): Output.note("(opened in your browser with \(Output.safe(command)))")
                    case .failed(let why): Output.note(Output.safe(why))
                    case .unavailable: break
                    }
                }
                Self.hintIfSilent(provider: start.provider)
            }
            guard let account = done.account else { throw .badResponse("login.wait answered without the account") }
            return account
        }
        try report(account, resource: params.resource)
    }

    /// The terminal sign-in: answers the daemon's questions until it has the account.
    private func signInHere(_ params: LoginStartParams) throws {
        let account = try DaemonCall.session(json: json) { broker throws(ClientError) -> AccountInfo in
            let start = try broker.loginStart(params)
            announce(start)
            Output.note("Signing in to \(Output.safe(start.provider)) (expires in \(Self.remaining(until: start.expiresAt, now: TimeText.now)))…")
            while true {
                let step = try broker.loginWait(LoginWaitParams(loginID: start.loginID))
                if let account = step.account { return account }
                guard let prompt = step.prompt else { throw .badResponse("login.wait answered neither an account nor a question") }
                let value = try TerminalPrompt.read(prompt)
                _ = try broker.loginAnswer(LoginAnswerParams(loginID: start.loginID, value: value))
            }
        }
        try report(account, resource: params.resource)
    }

    /// The lines on stderr that tell the user what to do; `qr`, the lines of a QR code,
    /// go right below the URL and code.
    static func instructions(for start: LoginStartResult, now: Int64 = TimeText.now, qr: [String] = []) -> [String] {
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
            // On a line of its own between blank ones: easy to find and to copy whole.
            lines.append("To sign in to \(provider), open this page in your browser:")
            lines.append("")
            lines.append(Output.safe(start.authorizationURL ?? ""))
            lines.append("")
        default:
            lines.append("Signing in to \(provider)…")
        }
        lines += qr
        lines.append("This sign-in expires in \(remaining(until: start.expiresAt, now: now)); waiting for it to finish…")
        return lines
    }

    /// How long a browser sign-in waits in silence before `hintIfSilent` speaks.
    static let silence = 30

    /// After `silence` seconds without an outcome, says what commonly holds a browser
    /// sign-in up (``silenceHint(provider:)``); the wait goes on.
    static func hintIfSilent(provider: String) {
        let hint = silenceHint(provider: provider)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(silence)) {
            Output.note(hint)
        }
    }

    /// What commonly holds a browser sign-in up, and what to do about it.
    static func silenceHint(provider: String) -> String {
        let name = Output.safe(provider)
        return """
            Nothing has come back from the browser in \(silence) seconds. If \(name) showed an error about \
            the redirect URI, it matches the redirect port exactly: set redirect_port for \(name) in config.toml \
            and register http://127.0.0.1:PORT/callback with it. If the page never opened, copy the URL above \
            into a browser, or use `authctl login --device`. Still waiting…
            """
    }

    /// "15 minutes", "1 minute", "45 seconds".
    static func remaining(until expiresAt: Int64, now: Int64) -> String {
        let seconds = max(0, expiresAt - now)
        if seconds < 90 { return seconds == 1 ? "1 second" : "\(seconds) seconds" }
        let minutes = (seconds + 30) / 60
        return "\(minutes) minutes"
    }
}
