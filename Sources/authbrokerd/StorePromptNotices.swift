import DesktopNotifications
import SecretStore
import Synchronization

/// The secret store, with a desktop notification when it waits on its own prompt
/// (KeePassXC's access request or its database unlock: `StoreError.prompting`): the
/// request's error sentence and `authctl status` say so to whoever asked, and the
/// notification tells the user at the desktop, where the prompt is, what to allow. Once per
/// episode: no second notice until a call to the store has worked again.
final class StorePromptNotices: CredentialStore {
    private let store: any CredentialStore
    private let desktop: DesktopNotifier
    private let told = Mutex(false)

    init(_ store: any CredentialStore, desktop: DesktopNotifier) {
        self.store = store
        self.desktop = desktop
    }

    var kind: String { store.kind }

    func check() async throws(StoreError) { try await watched { () async throws(StoreError) in try await store.check() } }

    func save(_ credential: StoredCredential) async throws(StoreError) {
        try await watched { () async throws(StoreError) in try await store.save(credential) }
    }

    func loadAll() async throws(StoreError) -> [StoredCredential] {
        try await watched { () async throws(StoreError) in try await store.loadAll() }
    }

    @discardableResult
    func delete(_ key: CredentialKey) async throws(StoreError) -> Bool {
        try await watched { () async throws(StoreError) in try await store.delete(key) }
    }

    private func watched<T: Sendable>(_ call: () async throws(StoreError) -> T) async throws(StoreError) -> T {
        do {
            let result = try await call()
            told.withLock { $0 = false }
            return result
        } catch {
            if case .prompting(let sentence) = error, told.withLock({ was in defer { was = true }; return !was }) {
                let desktop = self.desktop
                Task { await desktop.tell(summary: "authbroker is waiting for your secret store", body: sentence + ".") }
            }
            throw error
        }
    }
}
