/// Serialises the refreshes of one account (one refresh token).
///
/// Providers that rotate refresh tokens treat a second use of the same refresh token as
/// theft and revoke the whole grant, so refreshes of one account never overlap:
/// - concurrent requests for the same cache key share one refresh;
/// - requests for other keys of the same account queue behind it, first come first served,
///   and each uses the refresh token the previous one left behind.
actor RefreshQueue {
    private var inflight: [CacheKey: Task<CachedToken, any Error>] = [:]
    private var tail: Task<Void, Never>?

    func run(_ key: CacheKey, _ operation: @escaping @Sendable () async throws(BrokerError) -> CachedToken) async throws(BrokerError) -> CachedToken {
        let task: Task<CachedToken, any Error>
        if let shared = inflight[key] {
            task = shared
        } else {
            let previous = tail
            task = Task {
                await previous?.value
                return try await operation()
            }
            inflight[key] = task
            tail = Task { _ = try? await task.value }
        }
        let result = await task.result
        if inflight[key] == task { inflight[key] = nil }
        switch result {
        case .success(let token): return token
        case .failure(let error as BrokerError): throw error
        case .failure: throw BrokerError.internalError("a refresh failed unexpectedly")
        }
    }

    /// Runs `operation` in turn with the refreshes, never beside one (store writes of the
    /// account's refresh token go through here too, so an older write can never land last).
    func exclusive<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T {
        let previous = tail
        let task = Task {
            await previous?.value
            return await operation()
        }
        tail = Task { _ = await task.value }
        return await task.value
    }
}
