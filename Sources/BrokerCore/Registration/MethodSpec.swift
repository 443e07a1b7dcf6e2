import BrokerCrypto
import BrokerProtocol

/// One JSON-RPC method as a service registers it: its params, who may call it, and how it
/// is answered. The server (BrokerServer's `MethodTable`) turns each into a handler: it
/// decodes the params, asks the caller policy (`CallerGate`) what `access` says, and only
/// then calls what `answer` holds. Nothing here knows of NIO or of sockets, so a service
/// declares its methods without depending on the server, and adding a method touches its
/// service and BrokerProtocol only.
public struct MethodSpec<P: Decodable & Sendable, R: Encodable & Sendable>: Sendable {
    /// How a method answers: what it is, so the server runs each kind the way it needs
    /// (on the connection's thread, or as a task).
    ///
    /// A request the caller policy must first put to the user (a `confirm` rule) is
    /// answered after the user's yes, whatever the kind: the question is waited for, then
    /// the answer made as the kind says.
    public enum Answer: Sendable {
        /// At once, on the connection's thread, from memory: never suspends and never waits
        /// for the provider, the store or the user (`account.list`).
        case now(@Sendable (P) throws(BrokerError) -> R)
        /// At once, as `now`, from what depends on who asks: the caller's identification and
        /// its answers to `confirm` questions on the connection (nil: none, no rules)
        /// (`daemon.status`: under rules a caller sees only what it may get itself).
        case nowFor(@Sendable (CallerIdentification, ConfirmAnswers?, P) throws(BrokerError) -> R)
        /// Later, as a task: the work may wait for the provider, the store or the user.
        case later(@Sendable (P) async throws(BrokerError) -> R)
        /// At once when `fast` has the answer (a cache hit), else later by `slow` (the
        /// provider, a sign-in).
        case nowOrLater(fast: @Sendable (P) -> R?, slow: @Sendable (P) async throws(BrokerError) -> R)
        /// At once, and the connection it came on carries out the `SubscriptionChange`: the
        /// connection is the subscriber (`events.subscribe`, `events.unsubscribe`). What it
        /// then hears is filtered through the caller policy (`CallerGate.shows`).
        case subscription(@Sendable (P) throws(BrokerError) -> (SubscriptionChange, R))
    }

    public var method: RPCMethod
    /// The params of a request that sends none.
    public var empty: P
    /// Who may call it: the policy's question, or open to every caller with the reason.
    public var access: Access<P>
    /// How it is answered: at once, later, or at once when it can.
    public var answer: Answer
    /// Whether the work stops when the caller's connection closes (`login.wait`).
    public var cancelledOnClose: @Sendable (P) -> Bool
    /// Whether an answer that comes later may cost a request to the provider: counted
    /// against the connection's `cache_misses_per_minute`.
    public var mints: Bool
    /// Counts a request the caller policy lets through, once, whichever path then answers
    /// it (`token.get`'s `token_requests`: from the cache, refreshed, or after the user was
    /// asked). nil: the method has no count of its own.
    public var counted: (@Sendable () -> Void)?
    /// What a decision on this method's request is about, for the audit trail: methods that
    /// give tokens out say it (the params, and the answer when there is one); the method
    /// table writes the decision (`AuditTrail`). nil: not audited.
    public var audit: (@Sendable (P, R?) -> AuditSubject)?

    public init(_ method: RPCMethod, empty: P, access: Access<P>,
                cancelledOnClose: @escaping @Sendable (P) -> Bool = { _ in false },
                mints: Bool = false,
                counted: (@Sendable () -> Void)? = nil,
                audit: (@Sendable (P, R?) -> AuditSubject)? = nil,
                answer: Answer) {
        self.method = method
        self.empty = empty
        self.access = access
        self.answer = answer
        self.cancelledOnClose = cancelledOnClose
        self.mints = mints
        self.counted = counted
        self.audit = audit
    }
}

/// What a connection asks of the events hub: the connection itself is the subscriber, so
/// the server carries it out on the connection (`MethodSpec.Answer.subscription`).
public enum SubscriptionChange: Sendable, Equatable {
    /// From now on the events of these providers and kinds (nil: all), in place of any
    /// subscription the connection had.
    case subscribe(providers: Set<String>?, kinds: Set<EventKind>?)
    /// No more events.
    case unsubscribe
}

/// `login.answer`: its value may be a password, so the server reads it from the request's
/// bytes into `SecretBytes` and wipes the line (docs/security.md); the service gets the
/// sign-in's id and the value, never a String of it.
public struct SecretAnswerSpec: Sendable {
    public var method: RPCMethod
    public var access: Access<String>
    public var answer: @Sendable (_ loginID: String, _ value: SecretBytes) throws(BrokerError) -> LoginAnswerResult

    public init(_ method: RPCMethod, access: Access<String>,
                answer: @escaping @Sendable (String, SecretBytes) throws(BrokerError) -> LoginAnswerResult) {
        self.method = method
        self.access = access
        self.answer = answer
    }
}

/// What takes a service's methods: the server's method table, or a test's recording one.
public protocol MethodRegistrar {
    mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>)
    mutating func add(_ spec: SecretAnswerSpec)
}

/// A service that serves JSON-RPC methods: it hands its own registrations to whoever
/// builds the method table (`Broker.register(into:)`).
public protocol RegistersMethods {
    func register(into registrar: inout some MethodRegistrar)
}
