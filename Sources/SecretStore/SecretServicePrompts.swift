import CSecret
import Dispatch
import Synchronization

/// What the store knows about the Secret Service's own prompts: the one the running
/// libsecret call waits on (its start and end come from the store's proxy,
/// `authbroker_service_open`'s `on_prompt`), and the name of the process that serves the
/// Secret Service, for the sentences.
///
/// A prompt the service completes by itself (KeePassXC answers every CreateItem with one,
/// completed at once for a client it already allows) ends well within `grace`. One still
/// open after `grace` waits on the user: its caller gets `.prompting` (or `.locked`, when
/// the default collection was locked) at once instead of `.timedOut` after the store
/// timeout, and the call itself is left running so that the user's answer still counts,
/// until `limit`, when it is cancelled (libsecret then dismisses the prompt). While it is
/// open, every other call is answered the same at once rather than queued behind it. A
/// call that waits without a prompt on a store whose default collection is locked (a
/// locked KeePassXC database) is answered `.locked` the same way.
final class SecretServicePrompts: Sendable {
    /// The one of the process (one libsecret queue, one proxy).
    static let shared = SecretServicePrompts()

    /// How long a prompt may stay open before it is taken for a question to the user.
    static let grace: Duration = .seconds(1)
    /// How long a prompt is left open for the user's answer.
    static let limit: Duration = .seconds(120)

    /// The call running on the libsecret queue: how to answer its caller, how to cancel it.
    struct Running: Sendable {
        let answer: @Sendable (StoreError) -> Void
        let cancel: @Sendable () -> Void
    }

    private struct State {
        var store = "the Secret Service"
        var running: Running?
        var call = 0
        var prompt = 0
        var open: StoreError?
        var asking: StoreError?
    }

    private let state = Mutex(State())
    private let timers = DispatchQueue(label: "org.authbroker.secret-service.prompts")
    private let probes = DispatchQueue(label: "org.authbroker.secret-service.probes")

    /// The error of a prompt that is waiting on the user now, else nil.
    var asking: StoreError? { state.withLock { $0.asking } }

    /// The store as its sentences name it.
    var store: String { state.withLock { $0.store } }

    /// Names the store by the process that owns the Secret Service's bus name.
    func serving(process: String?) {
        let name = Self.storeName(process: process)
        state.withLock { $0.store = name }
    }

    /// Around each call on the libsecret queue. A call still running after `grace` with
    /// no prompt open has the default collection's lock looked at on a connection of its
    /// own (`probeLocked`).
    func begin(_ running: Running) {
        let call = state.withLock { s -> Int in
            s.running = running
            s.call += 1
            return s.call
        }
        probes.asyncAfter(deadline: BlockingCall.deadline(after: Self.grace)) { self.probeLocked(call) }
    }

    /// KeePassXC does not answer a search in a locked database until the user unlocked it
    /// (its "unlock before search", no prompt object): that is told from a hang by the
    /// collection's Locked property, which it still answers.
    private func probeLocked(_ call: Int) {
        let stillRunning = { (s: State) in s.call == call && s.running != nil && s.asking == nil }
        guard state.withLock({ stillRunning($0) }), authbroker_probe_default_locked(1000) == 1 else { return }
        let (running, error) = state.withLock { s -> (Running?, StoreError?) in
            guard stillRunning(s) else { return (nil, nil) }
            let error = Self.error(store: s.store, locked: true)
            s.asking = error
            return (s.running, error)
        }
        if let running, let error { running.answer(error) }
    }

    func end() {
        state.withLock {
            $0.running = nil
            $0.open = nil
            $0.asking = nil
        }
    }

    /// A prompt began (on the libsecret queue, inside the call).
    func started(locked: Int32) {
        let prompt = state.withLock { s -> Int in
            s.prompt += 1
            s.open = Self.error(store: s.store, locked: locked == 1)
            return s.prompt
        }
        timers.asyncAfter(deadline: BlockingCall.deadline(after: Self.grace)) {
            let (running, error) = self.state.withLock { s -> (Running?, StoreError?) in
                guard s.prompt == prompt, let open = s.open else { return (nil, nil) }
                s.asking = open
                return (s.running, open)
            }
            if let running, let error { running.answer(error) }
        }
        timers.asyncAfter(deadline: BlockingCall.deadline(after: Self.limit)) {
            let running = self.state.withLock { s -> Running? in
                s.prompt == prompt && s.open != nil ? s.running : nil
            }
            running?.cancel()
        }
    }

    /// The prompt ended (answered, dismissed or cancelled).
    func finished() {
        state.withLock {
            $0.open = nil
            $0.asking = nil
        }
    }

    /// The sentence for a prompt of `store`.
    static func error(store: String, locked: Bool) -> StoreError {
        if locked {
            let what = store == "KeePassXC" ? "its database" : "the keyring"
            return .locked("\(store) is asking to unlock \(what) (authbrokerd's items are in it, and it is locked): unlock it in \(store); authbrokerd writes and reads its items as soon as it is unlocked")
        }
        let how = store == "KeePassXC"
            ? "or turn off KeePassXC's \"Confirm when passwords are retrieved by clients\" (Settings > Secret Service Integration; ConfirmAccessItem=false under [FdoSecrets] in keepassxc.ini) so it does not ask"
            : "or set \(store) not to ask (docs/configuration.md)"
        return .prompting("waiting for \(store)'s access prompt: allow authbrokerd there (and let it remember the answer), \(how); authbrokerd writes the newest refresh token as soon as it is allowed")
    }

    /// A store's name from its process name (`/proc/PID/comm`).
    static func storeName(process: String?) -> String {
        switch process {
        case "keepassxc": return "KeePassXC"
        case "gnome-keyring-d", "gnome-keyring-daemon": return "gnome-keyring"
        case "kwalletd5", "kwalletd6", "ksecretd": return "KWallet"
        case let name? where !name.isEmpty: return name
        default: return "the Secret Service"
        }
    }
}

/// The store's proxy's `on_prompt` (C): `user` is `SecretServicePrompts.shared`.
let secretServicePromptCallback: authbroker_prompt_fn = { user, started, _, locked in
    guard let user else { return }
    let prompts = Unmanaged<SecretServicePrompts>.fromOpaque(user).takeUnretainedValue()
    if started != 0 {
        prompts.started(locked: locked)
    } else {
        prompts.finished()
    }
}
