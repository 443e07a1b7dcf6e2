import BrokerCrypto
import Logging

/// The page that ends a signed-out account's browser session at the provider with its
/// last ID token as `id_token_hint` (RP-Initiated Logout 1.0 §2: recommended, and some
/// providers refuse `post_logout_redirect_uri` without it), while no output carries the
/// token: `authctl logout` prints and opens a loopback address, and the page served there
/// holds a form with the hint that the user's browser posts to the provider.
///
/// The page is served once, at a path with a random part, on an ephemeral port of
/// 127.0.0.1 (the sign-in's loopback listener, `RedirectListening`), for `lifetime`; then
/// the listener closes and the ID token it held goes with it.
struct EndSessionPages: Sendable {
    let listening: any RedirectListening
    let logger: Logger

    /// How long the page waits for the browser: time to read the terminal and click.
    static let lifetime: Duration = .seconds(300)
    static let path = "/end-session"

    /// Opens the page; its address, or nil when no port could be bound (the caller then
    /// gives the URL without the hint).
    func open(provider: String, account: String, form: (action: String, fields: [(String, String)])) async -> String? {
        let key = SecureRandom.token(bytes: 16)
        let screen = RedirectScreen(
            accept: { raw in
                guard let got = RedirectQuery.parse(raw)["page"], constantTimeEqual(got, key) else { return nil }
                return [:]
            },
            refused: SignInPage.endSessionGone, late: SignInPage.endSessionGone, path: Self.path)
        let listener: any RedirectListener
        do {
            listener = try await listening.listen(port: 0, screen: screen)
        } catch {
            logger.notice("the sign-out page could not be opened; the end-session URL goes without id_token_hint", metadata: ["error": "\(error.message)"])
            return nil
        }
        let page = SignInPage.endSession(provider: provider, account: account, action: form.action, fields: form.fields)
        let logger = self.logger
        let timer = Task {
            try? await Task.sleep(for: Self.lifetime)
            await listener.close()
        }
        Task {
            if let visit = await listener.redirect() {
                visit.answer(page)
                logger.info("the sign-out page was opened", metadata: ["provider": "\(provider)"])
            }
            timer.cancel()
            await listener.close()
        }
        return "http://127.0.0.1:\(listener.port)\(Self.path)?page=\(key)"
    }
}
