/// A sign-in that waits for the user, as it is announced: never a token or a code, only
/// what the user needs to recognise it and the page that starts it.
public struct PendingSignIn: Sendable, Equatable {
    public var provider: String
    /// The authorization URL the "Sign in" action opens.
    public var url: String
    /// Unix seconds after which the sign-in can no longer complete.
    public var expiresAt: Double
    /// The program whose request started it (the first waiting caller), when known.
    public var program: RequestingProgram?

    public init(provider: String, url: String, expiresAt: Double, program: RequestingProgram? = nil) {
        self.provider = provider
        self.url = url
        self.expiresAt = expiresAt
        self.program = program
    }
}

/// Tells the user that a sign-in started on demand waits for them (the daemon's desktop
/// notification, docs/sign-in.md). BrokerCore knows nothing of D-Bus: the daemon gives the
/// Broker one of these at start.
public protocol SignInAnnouncing: Sendable {
    /// Shows the sign-in; returns how to take the announcement back, or nil when nothing
    /// could be shown (no notification server on the session bus, no session bus).
    func announce(_ signIn: PendingSignIn) async -> (any SignInAnnouncement)?
}

/// One shown announcement.
public protocol SignInAnnouncement: Sendable {
    /// Takes it back: the sign-in is over (done, failed, replaced or expired).
    func withdraw() async
}
