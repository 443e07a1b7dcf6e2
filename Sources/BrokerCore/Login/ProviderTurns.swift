import Synchronization

/// One provider's browser sign-ins start one at a time: each replaces the one before it
/// (freeing its port) and binds its listener before the next looks. Two started in the
/// same instant with a fixed `redirect_port` would otherwise both find nothing to replace,
/// and the second would find the port taken by the first.
final class ProviderTurns: Sendable {
    /// Per provider, the turn that ends last (finished turns stay until replaced).
    private let last = Mutex<[String: Task<Void, Never>]>([:])

    /// Runs `body` once the provider's earlier turns are over.
    func inTurn<T>(_ provider: String, _ body: () async throws(BrokerError) -> T) async throws(BrokerError) -> T {
        let (done, ends) = AsyncStream<Void>.makeStream()
        let previous = last.withLock { all in
            defer { all[provider] = Task { for await _ in done {} } }
            return all[provider]
        }
        defer { ends.finish() }
        await previous?.value
        return try await body()
    }
}
