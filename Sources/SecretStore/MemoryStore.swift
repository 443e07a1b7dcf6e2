import Synchronization

/// Keeps credentials in the daemon's memory only: after a restart every account must
/// sign in again. Chosen with `store = "memory"`.
public final class MemoryStore: CredentialStore {
    private let items = Mutex<[CredentialKey: StoredCredential]>([:])

    public init() {}

    public var kind: String { "memory" }

    public func check() async throws(StoreError) {}

    public func save(_ credential: StoredCredential) async throws(StoreError) {
        items.withLock { $0[credential.key] = credential }
    }

    public func loadAll() async throws(StoreError) -> [StoredCredential] {
        items.withLock { Array($0.values) }
    }

    @discardableResult
    public func delete(_ key: CredentialKey) async throws(StoreError) -> Bool {
        items.withLock { $0.removeValue(forKey: key) != nil }
    }
}
