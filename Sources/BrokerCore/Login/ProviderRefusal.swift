import OAuth

/// The sentence for a browser sign-in the provider sent back with `error` (RFC 6749
/// §4.1.2.1, OpenID Connect Core §3.1.2.6): what it answered, and what the person does
/// next, which depends on the answer. `authctl login` prints it and the daemon's
/// "Sign-in failed" page shows it.
enum ProviderRefusal {
    /// The answers a provider gives when it would have to show a page that
    /// `prompt=none` forbids it to show.
    static let needsAPage: Set<String> = ["login_required", "interaction_required", "consent_required", "account_selection_required"]

    /// - Parameters:
    ///   - prompt: the sign-in's `prompt` parameter, if it had one.
    ///   - configuredPrompt: `prompt` in the provider's `authorization_params`, if set.
    static func message(provider name: String, error: String, description: String?, prompt: String?, configuredPrompt: String?) -> String {
        let detail = description.map { ": \(ProviderAnswer.printable($0, limit: 200))" } ?? ""
        let answered = "the sign-in to \(name) was refused: the provider answered \(ProviderAnswer.printable(error, limit: 64))\(detail)"
        let again = "run `authctl login --provider \(name)` again"
        if needsAPage.contains(error), prompt == "none" {
            if configuredPrompt == "none" {
                return "\(answered), because prompt = \"none\" forbids it to show its sign-in page; remove prompt from authorization_params under [providers.\(name)] in config.toml, then \(again)"
            }
            return "\(answered), because `--prompt none` forbids it to show its sign-in page; \(again) without `--prompt none`"
        }
        if error == "access_denied" {
            return "\(answered) (access was declined on its page, or the account may not use this client); \(again) and allow access, or ask the provider's administrator"
        }
        return "\(answered); \(again)"
    }
}
