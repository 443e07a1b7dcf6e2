import SecretStore
import Synchronization

/// Whether the accounts the store holds are in memory, and why not when they are not.
///
/// The daemon starts even when the Secret Service is missing, locked or hung: it then
/// serves what needs no stored account (machine accounts), answers requests that do with
/// -32005 and this reason, and tries the store again in the background (`watchStore`)
/// until the accounts are loaded. Owned by the broker; nothing else writes it.
final class StoreAvailability: Sendable {
    enum State: Sendable, Equatable {
        /// The store was read: its accounts are in memory.
        case loaded
        /// The store could not be read; the sentence says why and what to do.
        case unavailable(StoreError)
    }

    private let state = Mutex(State.loaded)
    /// Whether a background watch for the store runs (at most one).
    private let watching = Mutex(false)

    var current: State { state.withLock { $0 } }

    /// The store's error while its accounts are not loaded, else nil.
    var failure: StoreError? {
        if case .unavailable(let error) = current { return error }
        return nil
    }

    func set(_ new: State) { state.withLock { $0 = new } }

    /// Claims the one background watch; false when one runs already.
    func startWatching() -> Bool {
        watching.withLock { running in
            if running { return false }
            running = true
            return true
        }
    }

    func stopWatching() { watching.withLock { $0 = false } }
}
