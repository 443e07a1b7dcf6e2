#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrowserLaunch
import CGio
import Dispatch
import Logging
import Synchronization

/// Announces sign-ins on demand with a desktop notification (org.freedesktop.Notifications
/// over the session bus, GIO's GDBus) whose "Sign in" action opens the sign-in page in the
/// user's browser. The notification names the provider only: never a token or a code.
public final class DesktopNotifier: SignInAnnouncing {
    private struct State {
        /// The bus connection, made on first use; nil until then or while there is no bus.
        var notifier: Handle?
        /// The page each shown notification's action opens, by notification id.
        var pages: [UInt32: String] = [:]
    }

    /// The C notifier: made once, used from the notification queue, never freed (it lives
    /// as long as the daemon), so the pointer may cross threads.
    private struct Handle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<AuthbrokerNotifier>
    }

    private let state = Mutex(State())
    /// Where the blocking D-Bus calls run, one at a time, never on an event loop.
    private let queue = DispatchQueue(label: "org.authbroker.notifications")
    /// Goes before the browser command (see `init`).
    private let launcher: [String]
    private let logger: Logger
    /// How long the notification server may take to answer.
    static let callTimeoutMilliseconds: Int32 = 5000

    /// `launcher` goes before the browser command: under systemd, `systemd-run --user …`,
    /// so the browser starts as its own unit, outside the daemon's sandbox and cgroup.
    public init(launcher: [String] = [], logger: Logger) {
        self.launcher = launcher
        self.logger = logger
    }

    public func announce(_ signIn: PendingSignIn) async -> (any SignInAnnouncement)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<(any SignInAnnouncement)?, Never>) in
            queue.async { continuation.resume(returning: self.show(signIn)) }
        }
    }

    private func show(_ signIn: PendingSignIn) -> (any SignInAnnouncement)? {
        guard let notifier = connected() else { return nil }
        let provider = SignInPage.escape(signIn.provider)  // the body may be read as markup
        let seconds = max(1, signIn.expiresAt - Double(time(nil)))
        let minutes = Int((seconds + 59) / 60)
        let body = "A program is waiting for you to sign in to \(provider). Choose Sign in to open the sign-in page in your browser"
            + " (it expires in \(minutes == 1 ? "1 minute" : "\(minutes) minutes"))."
        var error: UnsafeMutablePointer<GError>?
        let id = authbroker_notifier_notify(
            notifier, "authbroker", "Sign in to \(provider)", body, "sign-in", "Sign in",
            Int32(min(seconds * 1000, Double(Int32.max))), Self.callTimeoutMilliseconds, &error)
        guard id != 0 else {
            logger.notice("no desktop notification for the sign-in: the waiting programs show its page", metadata: [
                "provider": "\(signIn.provider)", "reason": "\(String(cString: authbroker_error_message(error)))",
            ])
            if let error { g_error_free(error) }
            return nil
        }
        state.withLock { $0.pages[id] = signIn.url }
        return Shown(id: id, notifier: self)
    }

    /// The session-bus connection, made now if there is none yet; nil without a bus.
    private func connected() -> UnsafeMutablePointer<AuthbrokerNotifier>? {
        if let handle = state.withLock({ $0.notifier }) { return handle.pointer }
        let onAction: authbroker_action_fn = { id, action, user in
            guard let user, let action else { return }
            Unmanaged<DesktopNotifier>.fromOpaque(user).takeUnretainedValue().invoked(id: id, action: String(cString: action))
        }
        var error: UnsafeMutablePointer<GError>?
        // The connection calls back into this object for as long as the process lives.
        guard let notifier = authbroker_notifier_new(onAction, Unmanaged.passRetained(self).toOpaque(), &error) else {
            logger.notice("no session bus for desktop notifications", metadata: ["reason": "\(String(cString: authbroker_error_message(error)))"])
            if let error { g_error_free(error) }
            return nil
        }
        let handle = Handle(pointer: notifier)
        state.withLock { $0.notifier = handle }
        return notifier
    }

    /// The user chose an action of one of our notifications (on the notifier's thread).
    private func invoked(id: UInt32, action: String) {
        guard action == "default" || action == "sign-in", let page = state.withLock({ $0.pages[id] }) else { return }
        let launcher = self.launcher
        let logger = self.logger
        DispatchQueue.global(qos: .userInitiated).async {
            switch Browser.open(page, launcher: launcher) {
            case .opened(let command): logger.info("sign-in page opened from the notification", metadata: ["command": "\(command)"])
            case .failed(let why): logger.warning("the sign-in page could not be opened from the notification", metadata: ["reason": "\(why)"])
            case .unavailable: logger.warning("the sign-in page could not be opened from the notification: neither BROWSER nor a desktop session (DISPLAY, WAYLAND_DISPLAY) is in authbrokerd's environment")
            }
        }
    }

    fileprivate func withdraw(_ id: UInt32) {
        queue.async {
            let handle = self.state.withLock { s -> Handle? in
                s.pages[id] = nil
                return s.notifier
            }
            if let handle { authbroker_notifier_close(handle.pointer, id) }
        }
    }
}

/// One shown notification.
private struct Shown: SignInAnnouncement {
    let id: UInt32
    let notifier: DesktopNotifier

    func withdraw() async {
        notifier.withdraw(id)
    }
}
