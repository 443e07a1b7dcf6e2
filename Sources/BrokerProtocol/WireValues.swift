/// The closed sets of strings in the messages (docs/protocol.md). Each keeps a value it
/// does not know as `unknown`: see `WireEnum`.

/// How a sign-in proceeds: `login.start`'s `flow`.
public enum LoginFlow: WireEnum {
    /// Authorization code + PKCE through the browser and a loopback redirect (the default).
    case browser
    /// The device authorization grant (RFC 8628).
    case device
    /// Questions asked through `login.wait` and answered by `login.answer`.
    case terminal
    case unknown(String)

    public static let known: [LoginFlow] = [.browser, .device, .terminal]

    public var rawValue: String {
        switch self {
        case .browser: "browser"
        case .device: "device"
        case .terminal: "terminal"
        case .unknown(let value): value
        }
    }
}

/// Whether an account can mint tokens without the user: `state` in `account.list`.
public enum AccountState: WireEnum {
    case ready
    /// The refresh token was refused (`invalid_grant`): only a new sign-in helps.
    case loginRequired
    case unknown(String)

    public static let known: [AccountState] = [.ready, .loginRequired]

    public var rawValue: String {
        switch self {
        case .ready: "ready"
        case .loginRequired: "login_required"
        case .unknown(let value): value
        }
    }
}

extension LoginPrompt {
    /// How an answer is typed: `kind` of a terminal sign-in's question.
    public enum Kind: WireEnum {
        /// Shown as typed.
        case text
        /// Never echoed: a password.
        case secret
        /// A one-time code, not echoed either.
        case otp
        case unknown(String)

        public static let known: [Kind] = [.text, .secret, .otp]

        public var rawValue: String {
            switch self {
            case .text: "text"
            case .secret: "secret"
            case .otp: "otp"
            case .unknown(let value): value
            }
        }
    }
}
