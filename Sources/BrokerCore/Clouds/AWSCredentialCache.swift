import Synchronization

/// What AWS credentials are filed under: one account, one role with one session policy,
/// duration, session name and endpoint, and the token that was sent (nil: the ID token,
/// else the audience of the access token).
struct AWSCredentialKey: Hashable, Sendable {
    var account: AccountKey
    var request: AssumeRoleRequest
    var audience: String?
}

/// AWS credentials by key, in memory only, served until shortly before their
/// `Expiration`; concurrent first callers of one key share one STS request.
final class AWSCredentialCache: Sendable {
    /// The most credentials held: each cost an STS request, which the caller's
    /// `cache_misses_per_minute` counts, so only a daemon asked for ever new roles or
    /// policies comes near it; the ones that expire soonest go first.
    static let capacity = 512

    private let entries = Mutex<[AWSCredentialKey: AWSCredentials]>([:])
    private let inFlight = Mutex<[AWSCredentialKey: Task<Result<AWSCredentials, BrokerError>, Never>]>([:])

    /// The life credentials must have left to be served: 15 minutes (botocore refreshes
    /// process credentials from then on, asking again on every call), a quarter of their
    /// duration when that is shorter, at least a minute.
    static func margin(durationSeconds: Int) -> Int64 {
        Int64(max(60, min(900, durationSeconds / 4)))
    }

    func lookup(_ key: AWSCredentialKey, now: Double) -> AWSCredentials? {
        entries.withLock { all in
            guard let c = all[key], Double(c.expiresAt) - now > Double(Self.margin(durationSeconds: key.request.durationSeconds)) else { return nil }
            return c
        }
    }

    /// Stores `credentials`; past `capacity`, drops the expired ones and those of accounts
    /// `keep` no longer names (signed out), then the soonest to expire.
    func store(_ credentials: AWSCredentials, for key: AWSCredentialKey, now: Double, keep: (AccountKey) -> Bool) {
        entries.withLock { all in
            all[key] = credentials
            guard all.count > Self.capacity else { return }
            all = all.filter { Double($0.value.expiresAt) > now && keep($0.key.account) }
            while all.count > Self.capacity, let soonest = all.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
                all[soonest.key] = nil
            }
        }
    }

    /// How many are held, expired ones included.
    var count: Int { entries.withLock { $0.count } }

    /// The credentials `mint` makes for `key`, or those another caller is making for it.
    func shared(_ key: AWSCredentialKey,
                _ mint: @escaping @Sendable () async -> Result<AWSCredentials, BrokerError>) async -> Result<AWSCredentials, BrokerError> {
        let (task, mine) = inFlight.withLock { running -> (Task<Result<AWSCredentials, BrokerError>, Never>, Bool) in
            if let task = running[key] { return (task, false) }
            let task = Task { await mint() }
            running[key] = task
            return (task, true)
        }
        let result = await task.value
        if mine { _ = inFlight.withLock { $0.removeValue(forKey: key) } }
        return result
    }
}
