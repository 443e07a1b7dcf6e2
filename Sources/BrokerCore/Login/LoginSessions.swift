import BrokerProtocol
import Synchronization

/// A sign-in in progress: started by `login.start`, finished by the provider, awaited by
/// `login.wait` (any number of times, until it is purged).
final class LoginSession: Sendable {
    let id: String
    let provider: String
    let expiresAt: Double
    let task: Task<AccountInfo, any Error>

    init(id: String, provider: String, expiresAt: Double, task: Task<AccountInfo, any Error>) {
        self.id = id
        self.provider = provider
        self.expiresAt = expiresAt
        self.task = task
    }
}

/// The sign-ins in progress, capped so a local program cannot make the daemon poll a
/// provider without end.
final class LoginSessions: Sendable {
    static let limit = 16
    /// How long a finished sign-in stays for a late `login.wait`.
    static let keepAfterExpiry: Double = 300
    private let sessions = Mutex<[String: LoginSession]>([:])
    /// Sign-ins whose task has not finished, for the daemon's idle exit.
    private let running = Atomic<Int>(0)

    func add(_ session: LoginSession, now: Double) throws(BrokerError) {
        try sessions.withLock { (all: inout [String: LoginSession]) throws(BrokerError) in
            all = all.filter { $0.value.expiresAt + Self.keepAfterExpiry > now }
            guard all.count < Self.limit else {
                throw BrokerError.overloaded(message: "\(Self.limit) sign-ins are already in progress: finish or abandon one first")
            }
            all[session.id] = session
        }
        running.wrappingAdd(1, ordering: .relaxed)
        Task {
            _ = await session.task.result
            self.running.wrappingSubtract(1, ordering: .relaxed)
        }
    }

    /// Sign-ins still waiting for the user or the provider.
    var inProgress: Int { running.load(ordering: .relaxed) }

    func find(id: String?, provider: String?) -> LoginSession? {
        sessions.withLock { all in
            if let id { return all[id] }
            return all.values.filter { provider == nil || $0.provider == provider }.max { $0.expiresAt < $1.expiresAt }
        }
    }
}

extension Broker {
    /// Sign-ins still waiting for the user or the provider: a daemon with one is not idle.
    public var signInsInProgress: Int { logins.inProgress }
}
