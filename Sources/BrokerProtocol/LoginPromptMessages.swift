/// A question a `terminal` sign-in asks the user, from `login.wait`.
public struct LoginPrompt: Codable, Sendable, Equatable {
    /// `text` (shown as typed), `secret` (never echoed: a password) or `otp` (a one-time
    /// code, not echoed either). A client treats a kind it does not know as `secret`.
    public var kind: Kind
    /// What to ask, e.g. "Password for alice".
    public var label: String
    /// What the answer is, for programs that answer without a person: `username`,
    /// `password`, `email_code`, `otp`.
    public var name: String

    public init(kind: Kind, label: String, name: String) {
        self.kind = kind
        self.label = label
        self.name = name
    }
}

/// `login.answer` params: the answer to the prompt the sign-in waits on.
public struct LoginAnswerParams: Codable, Sendable, Equatable {
    public var loginID: String
    /// The user's answer. Never logged, echoed or kept past the request it is sent in.
    public var value: String

    public init(loginID: String, value: String) {
        self.loginID = loginID
        self.value = value
    }

    enum CodingKeys: String, CodingKey {
        case loginID = "login_id"
        case value
    }
}

/// `login.answer` result.
public struct LoginAnswerResult: Codable, Sendable, Equatable {
    public var accepted: Bool
    public init(accepted: Bool) { self.accepted = accepted }
}
