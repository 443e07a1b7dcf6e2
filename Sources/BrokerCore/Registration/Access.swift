/// Who may call a method. Every method says one or the other (`MethodSpec.access`), so a
/// method cannot be served without a decision about it (docs/security.md, "Who may call
/// what").
public enum Access<P: Sendable>: Sendable {
    /// The caller policy decides, on what `question` reads from the request, before any
    /// service or cache sees it. `what` names what is checked, for docs and tests. A nil
    /// question means this request asks for nothing the rules restrict (`login.start`
    /// without `join`: the user's own sign-in).
    case checked(_ what: String, _ question: @Sendable (P) -> PolicyQuestion?)
    /// Every caller of the user may call it; the reason says why that is safe.
    case open(_ reason: String)

    /// The reason of an open method, or nil.
    public var openReason: String? {
        if case .open(let reason) = self { return reason }
        return nil
    }

    /// What a checked method's policy checks, or nil.
    public var checks: String? {
        if case .checked(let what, _) = self { return what }
        return nil
    }
}

/// What a request asks of the caller policy.
public enum PolicyQuestion: Sendable, Equatable {
    /// A token of `provider` (nil: the default one) for every one of `targets` (nil: the
    /// default audience), with the caller's own `scopes` and `params` names.
    case token(provider: String?, targets: [String?], scopes: [String], params: [String])
    /// Dropping a cached token (`token.reject`): held to the rules as the token itself, but
    /// a `confirm = true` rule asks nothing, since nothing is given out.
    case reject(provider: String?, targets: [String?], scopes: [String], params: [String])
    /// The account's claims (`claims = true`).
    case claims(provider: String?)
    /// A sign-in on demand put in front of the user: the caller must be able to use it.
    case signIn(provider: String?, resource: String?)
}
