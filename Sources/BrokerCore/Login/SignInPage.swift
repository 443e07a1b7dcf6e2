/// A page the loopback listener shows the browser: an HTTP status and a small,
/// self-contained HTML document (no external assets, no script; light and dark schemes).
/// Every piece of text is escaped: the provider's name, the account and any provider
/// error are not ours.
public struct SignInPage: Sendable, Equatable {
    public let status: Int
    public let html: String

    init(status: Int, title: String, tone: Tone, heading: String, paragraphs: [String]) {
        self.status = status
        self.html = Self.document(title: title, tone: tone, heading: heading, paragraphs: paragraphs)
    }

    enum Tone: String {
        case good, bad
    }

    /// The sign-in worked.
    static func signedIn(provider: String, account: String) -> SignInPage {
        SignInPage(status: 200, title: "Signed in", tone: .good, heading: "You are signed in", paragraphs: [
            "authbroker signed you in to <b>\(escape(provider))</b> as <b>\(escape(account))</b>.",
            "Programs that ask authbroker for tokens now get them for this account. You can close this tab and go back to your terminal.",
        ])
    }

    /// The sign-in failed; `reason` is the sentence `authctl login` prints too, and it says
    /// what to do next (which is not always to run the same command again).
    static func failed(provider: String, reason: String) -> SignInPage {
        SignInPage(status: 400, title: "Sign-in failed", tone: .bad, heading: "Sign-in failed", paragraphs: [
            "authbroker could not sign you in to <b>\(escape(provider))</b>:",
            "<span class=\"why\">\(commands(escape(reason)))</span>",
            "Close this tab and go back to your terminal, where <code>authctl login</code> printed the same. If signing in again fails the same way, <code>journalctl --user -u authbroker</code> (or the daemon's own output) says more.",
        ])
    }

    /// Escaped text with its `backquoted` commands set as code, as a terminal user reads
    /// them; unbalanced backquotes are left as they are.
    static func commands(_ escaped: String) -> String {
        let parts = escaped.split(separator: "`", omittingEmptySubsequences: false)
        guard parts.count > 1, parts.count % 2 == 1 else { return escaped }
        return parts.enumerated().map { $0.offset % 2 == 1 ? "<code>\($0.element)</code>" : String($0.element) }.joined()
    }

    /// A request to /callback without the sign-in's `state`: not from this sign-in's
    /// provider redirect (a stale tab, or another program or page poking the port).
    static func notThisSignIn(provider: String) -> SignInPage {
        SignInPage(status: 400, title: "Not this sign-in", tone: .bad, heading: "This link is not for the sign-in in progress", paragraphs: [
            "It does not carry the code of the sign-in to <b>\(escape(provider))</b> that authbroker is waiting for, so it was ignored.",
            "If you are signing in, finish in the tab <code>authctl login</code> opened; that sign-in is still waiting.",
        ])
    }

    /// A second redirect with the right `state` after the first was taken.
    static func alreadyAnswered(provider: String) -> SignInPage {
        SignInPage(status: 400, title: "Already answered", tone: .bad, heading: "This sign-in was already answered", paragraphs: [
            "authbroker received the answer from <b>\(escape(provider))</b> for this sign-in already; the terminal says how it went. You can close this tab.",
        ])
    }

    /// The page `authctl logout` opens to end the browser session at the provider: a form
    /// the user sends with one button, which sends the end-session request with the
    /// account's last ID token as `id_token_hint` (RP-Initiated Logout 1.0 §2). As a GET:
    /// §2 asks providers to take POST too, but some answer it 404 (Glewlwyd), and a GET is
    /// what every web application's sign-out sends. No script: the page's policy forbids
    /// it, and a button is the confirmation the spec expects.
    static func endSession(provider: String, account: String, action: String, fields: [(String, String)]) -> SignInPage {
        let inputs = fields.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined()
        return SignInPage(status: 200, title: "Sign out", tone: .good, heading: "Signed out here", paragraphs: [
            "authbroker signed <b>\(escape(account))</b> out of <b>\(escape(provider))</b> on this computer. Your browser may still be signed in there.",
            "<form method=\"get\" action=\"\(escape(action))\">\(inputs)<button type=\"submit\">End the session at \(escape(provider))</button></form>",
            "This page works once; you can close it to stay signed in to \(escape(provider)) in the browser.",
        ])
    }

    /// A visit to the sign-out page's port without its key.
    static let endSessionGone = SignInPage(status: 404, title: "Not found", tone: .bad, heading: "Not the sign-out page", paragraphs: [
        "This address does not carry the key of the sign-out page that <code>authctl logout</code> printed. That page works once, for five minutes; the sign-out on this computer is done either way.",
    ])

    /// Any path but /callback.
    public static let notFound = SignInPage(status: 404, title: "Not found", tone: .bad, heading: "Nothing here", paragraphs: [
        "This address only receives the answer of an <code>authctl login</code> sign-in.",
    ])

    private static func document(title: String, tone: Tone, heading: String, paragraphs: [String]) -> String {
        let body = paragraphs.map { "<p>\($0)</p>" }.joined(separator: "\n")
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
            <meta name="color-scheme" content="light dark"><title>\(escape(title)) · authbroker</title>
            <style>
            :root{--bg:#f6f7f9;--card:#fff;--fg:#1d2330;--muted:#5b6474;--good:#1a7f4b;--bad:#b42318;--line:#dde1e8}
            @media (prefers-color-scheme:dark){:root{--bg:#14171c;--card:#1e232b;--fg:#e6e9ef;--muted:#a3acba;--good:#5fd39a;--bad:#ff8a80;--line:#323946}}
            body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
            main{max-width:34rem;margin:1.5rem;padding:2rem 2.25rem;background:var(--card);border:1px solid var(--line);border-radius:12px}
            .product{margin:0 0 1rem;color:var(--muted);font-size:.85rem;letter-spacing:.06em;text-transform:uppercase}
            h1{margin:0 0 .75rem;font-size:1.5rem;color:var(--\(tone.rawValue))}
            h1::before{content:"\(tone == .good ? "\\2713" : "\\2717")";margin-right:.5rem}
            p{margin:.6rem 0}.why{display:block;padding:.6rem .8rem;border-left:3px solid var(--bad);background:var(--bg);overflow-wrap:anywhere}
            code{font:.9em ui-monospace,monospace;background:var(--bg);padding:.1em .3em;border-radius:4px}
            button{font:inherit;margin:.4rem 0;padding:.5rem 1rem;border:1px solid var(--line);border-radius:8px;background:var(--bg);color:var(--fg);cursor:pointer}
            </style></head>
            <body><main><p class="product">authbroker</p><h1>\(escape(heading))</h1>
            \(body)
            </main></body></html>

            """
    }

    /// HTML-escapes text for element content and attribute values (also used for the
    /// markup of desktop notifications).
    public static func escape(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
