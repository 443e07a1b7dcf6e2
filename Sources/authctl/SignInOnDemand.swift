import BrokerClient
import BrokerProtocol
import BrowserLaunch

/// `--wait-for-sign-in` (and kubectl's interactive exec): instead of failing with "not
/// signed in", join the provider's one pending sign-in in the daemon, show its page, and
/// wait for it (docs/sign-in.md, "Sign-in on demand").
enum SignInOnDemand {
    /// Runs `body`; when it fails because the account needs a sign-in and `wait` is set,
    /// joins (or starts) the daemon's sign-in for the provider, waits for it with
    /// `token.get`'s `wait_for_sign_in`, and runs `body` again.
    static func retrying<T>(_ broker: BrokerConnection, _ params: TokenGetParams, wait: Bool,
                            _ body: () throws(ClientError) -> T) throws(ClientError) -> T {
        do {
            return try body()
        } catch {
            guard wait, case .rpc(let refusal) = error, refusal.kind == .loginRequired else { throw error }
            let start = try broker.loginStart(LoginStartParams(provider: refusal.data?.provider ?? params.provider, join: true))
            var waiting = params
            waiting.waitForSignIn = max(1, min(TokenGetParams.waitForSignInRange.upperBound, Int(start.expiresAt - TimeText.now)))
            _ = try broker.tokenAfterSignIn(waiting) { tell(start) }
            return try body()
        }
    }

    /// What the user reads on stderr (stdout is the token's, or kubectl's JSON): the page,
    /// and whether a notification or this command opens it. Only the caller that started
    /// the sign-in opens a browser, and only without a notification: one tab, however many
    /// programs wait.
    static func tell(_ start: LoginStartResult, open: (String) -> Browser.Outcome = { Browser.open($0) }) {
        let provider = Output.safe(start.provider)
        guard let url = start.authorizationURL.map(Output.safe) else {
            // Joined a device or terminal sign-in started elsewhere: say how to finish it.
            if start.verificationURI != nil {
                Output.note("Signing in to \(provider) is needed, and a device sign-in is in progress:")
                Login.instructions(for: start, now: TimeText.now).forEach(Output.note)
            } else {
                Output.note("Signing in to \(provider) is needed, and a sign-in in the terminal (`authctl login --terminal`) is in progress: finish it there.")
                Output.note("Waiting for the sign-in to \(provider) (it expires in \(Login.remaining(until: start.expiresAt, now: TimeText.now)))…")
            }
            return
        }
        Output.note("Signing in to \(provider) is needed. Open this page in your browser:")
        Output.note("")
        Output.note(url)
        Output.note("")
        if start.notified == true {
            Output.note("(a desktop notification offers to open it too)")
        } else if start.joined != true {
            switch open(url) {
            case .opened(let command): Output.note("(opened in your browser with \(Output.safe(command)))")
            case .failed(let why): Output.note(Output.safe(why))
            case .unavailable: break
            }
        }
        Output.note("Waiting for the sign-in to \(provider) (it expires in \(Login.remaining(until: start.expiresAt, now: TimeText.now)))…")
    }
}
