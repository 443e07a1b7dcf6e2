import Synchronization

/// What a `confirm = true` rule asks the user before a caller gets a token; an answer is
/// remembered on the connection by the whole question (a yes to a token for the resource
/// is no yes to an exchange that also names an audience).
///
/// Equal and hashed by what it asks (provider, resource, audience) only: the lease it may
/// offer (`lease`) says who asks, which on one connection is always the same.
public struct ConfirmQuestion: Sendable, Hashable {
    public var provider: String
    /// The resource asked for; nil for the provider's default audience.
    public var resource: String?
    /// A token exchange's audience besides its resource: the provider mints the new token
    /// for it (Keycloak, Okta, Auth0), so the user is asked about it too. nil otherwise.
    public var audience: String?
    /// The lease the user may give instead of a yes for the connection ("Allow for N
    /// minutes"), when a rule that grants the request has `confirm_for`; nil otherwise.
    public var lease: LeaseOffer?

    public init(provider: String, resource: String?, audience: String? = nil, lease: LeaseOffer? = nil) {
        self.provider = provider
        self.resource = resource
        self.audience = audience
        self.lease = lease
    }

    public static func == (a: ConfirmQuestion, b: ConfirmQuestion) -> Bool {
        a.provider == b.provider && a.resource == b.resource && a.audience == b.audience
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(provider)
        hasher.combine(resource)
        hasher.combine(audience)
    }

    /// What the token is for, as the user reads it: "https://api", "https://api and
    /// payroll" (an exchange's resource and audience), or "the default audience".
    public var tokenFor: String {
        [resource, audience].compactMap { $0 }.joined(separator: " and ").nonEmpty ?? "the default audience"
    }
}

private extension String {
    var nonEmpty: String? { isEmpty ? nil : self }
}

/// The user's answer, or why there is none.
public enum ConfirmAnswer: Sendable, Equatable {
    case allowed
    case denied
    /// The notification was closed without an action.
    case dismissed
    /// No answer within `[daemon] confirm_timeout` seconds.
    case timedOut
    /// Nothing could be shown (no session bus, no notification server); the reason.
    case unavailable(String)
    /// As many questions as may wait at once are waiting already (the limit): not asked.
    case busy(Int)
    /// As many questions of this program as one program may have waiting are waiting
    /// already (the limit, `QuestionShares`): not asked; other programs' still are.
    case programBusy(Int)
    /// The user chose the lease the question offered ("Allow for N minutes").
    case leased
    /// Not asked: the notification server lets any program of the user answer its
    /// questions (mako, dunst, swaync); what it is and how, for the refusal.
    case answerableByOthers(String)
}

/// Asks the user whether a program may have a token (the daemon's desktop notification).
/// BrokerCore knows nothing of D-Bus: the daemon gives the Broker one of these at start.
public protocol CallerConfirming: Sendable {
    /// Shows the question with Allow and Deny and waits for the answer, at most `seconds`.
    /// `program` is who asks (nil: unknown).
    func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer
}

/// One connection's answers to `confirm` questions: a connection belongs to one process
/// (docs/security.md), so an answer holds for it until it closes, and a new connection asks
/// again. A yes or a no is remembered; no answer (time-out, nothing shown) is not.
/// Concurrent requests for the same question share one notification.
public final class ConfirmAnswers: Sendable {
    private enum Entry {
        case asking(Task<ConfirmAnswer, Never>)
        case answered(ConfirmAnswer)
    }

    private let entries = Mutex<[ConfirmQuestion: Entry]>([:])

    public init() {}

    /// Whether the user already allowed `question` on this connection (no waiting).
    public func allowed(_ question: ConfirmQuestion) -> Bool {
        entries.withLock { if case .answered(.allowed)? = $0[question] { true } else { false } }
    }

    /// Whether the user allowed some token of `provider` on this connection.
    public func allowedSome(of provider: String) -> Bool {
        entries.withLock { all in
            all.contains { question, entry in
                guard case .answered(.allowed) = entry else { return false }
                return question.provider == provider
            }
        }
    }

    /// The answer to `question`: remembered, being asked, or asked now with `ask`.
    func answer(_ question: ConfirmQuestion, ask: @escaping @Sendable () async -> ConfirmAnswer) async -> ConfirmAnswer {
        let task = entries.withLock { all -> Task<ConfirmAnswer, Never>? in
            switch all[question] {
            case .answered?: return nil
            case .asking(let task)?: return task
            case nil:
                let task = Task { await ask() }
                all[question] = .asking(task)
                return task
            }
        }
        guard let task else {
            return entries.withLock { if case .answered(let a)? = $0[question] { a } else { .denied } }
        }
        let answer = await task.value
        entries.withLock { all in
            switch answer {
            case .allowed, .denied: all[question] = .answered(answer)
            // The lease itself is the gate's (`LeaseTable`); on this connection it is a yes.
            case .leased: all[question] = .answered(.allowed)
            case .dismissed, .timedOut, .unavailable, .busy, .programBusy, .answerableByOthers: all[question] = nil
            }
        }
        return answer
    }
}
