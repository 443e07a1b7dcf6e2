import BrokerCrypto
import BrokerProtocol

/// One JSON-RPC method as a service registers it: its params, who may call it, and how it
/// is answered. The server (BrokerServer's `MethodTable`) turns each into a handler: it
/// decodes the params, asks the caller policy (`CallerGate`) what `access` says, and only
/// then calls `fast`, `fastFor` or `slow`. Nothing here knows of NIO or of sockets, so a
/// service declares its methods without depending on the server, and adding a method
/// touches its service and BrokerProtocol only.
public struct MethodSpec<P: Decodable & Sendable, R: Encodable & Sendable>: Sendable {
    public var method: RPCMethod
    /// The params of a request that sends none.
    public var empty: P
    /// Who may call it: the policy's question, or open to every caller with the reason.
    public var access: Access<P>
    /// An answer without suspending (a cache hit), or nil to go on to `slow`.
    public var fast: (@Sendable (P) -> R?)?
    /// `fast` for answers that depend on who asks (`daemon.status` under rules), and on the
    /// user's answers to its `confirm` questions on the connection (nil: none, no rules).
    public var fastFor: (@Sendable (CallerIdentification, ConfirmAnswers?, P) -> R?)?
    /// Whether the work stops when the caller's connection closes (`login.wait`).
    public var cancelledOnClose: @Sendable (P) -> Bool
    /// Whether an answer that comes later may cost a request to the provider: counted
    /// against the connection's `cache_misses_per_minute`.
    public var mints: Bool
    /// Counts a request the caller policy lets through, once, whichever path then answers
    /// it (`token.get`'s `token_requests`: from the cache, refreshed, or after the user was
    /// asked). nil: the method has no count of its own.
    public var counted: (@Sendable () -> Void)?
    /// The whole answer, which may wait for the provider, the store or the user.
    public var slow: @Sendable (P) async throws(BrokerError) -> R
    /// What a decision on this method's request is about, for the audit trail: methods that
    /// give tokens out say it (the params, and the answer when there is one); the method
    /// table writes the decision (`AuditTrail`). nil: not audited.
    public var audit: (@Sendable (P, R?) -> AuditSubject)?

    public init(_ method: RPCMethod, empty: P, access: Access<P>,
                fast: (@Sendable (P) -> R?)? = nil,
                fastFor: (@Sendable (CallerIdentification, ConfirmAnswers?, P) -> R?)? = nil,
                cancelledOnClose: @escaping @Sendable (P) -> Bool = { _ in false },
                mints: Bool = false,
                counted: (@Sendable () -> Void)? = nil,
                audit: (@Sendable (P, R?) -> AuditSubject)? = nil,
                slow: @escaping @Sendable (P) async throws(BrokerError) -> R) {
        self.method = method
        self.empty = empty
        self.access = access
        self.fast = fast
        self.fastFor = fastFor
        self.cancelledOnClose = cancelledOnClose
        self.mints = mints
        self.counted = counted
        self.slow = slow
        self.audit = audit
    }
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

/// A method the connection itself serves (`events.subscribe`: the connection is the
/// subscriber), registered so its access is declared like every other method's.
public struct ConnectionMethodSpec: Sendable {
    public var method: RPCMethod
    /// Open to every caller of the user: what the connection hears is filtered by the
    /// policy (`CallerGate.shows`), which the reason says.
    public var openReason: String

    public init(_ method: RPCMethod, openReason: String) {
        self.method = method
        self.openReason = openReason
    }
}

/// What takes a service's methods: the server's method table, or a test's recording one.
public protocol MethodRegistrar {
    mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>)
    mutating func add(_ spec: SecretAnswerSpec)
    mutating func add(_ spec: ConnectionMethodSpec)
}

/// A service that serves JSON-RPC methods: it hands its own registrations to whoever
/// builds the method table (`Broker.register(into:)`).
public protocol RegistersMethods {
    func register(into registrar: inout some MethodRegistrar)
}
