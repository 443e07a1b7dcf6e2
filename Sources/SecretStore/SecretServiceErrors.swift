import CSecret

/// Turns libsecret's `GError`s into `StoreError`s with sentences a user can act on.
///
/// GError messages from libsecret and GDBus never contain a secret (they name objects,
/// buses and services); secrets are never passed here.
enum SecretServiceErrors {
    static let sessionBusAdvice =
        "run authbrokerd inside your desktop session or as a systemd user service; on a host without a desktop keyring (a server reached by ssh) set store = \"kernel-keyring\" in config.toml (sign-ins kept until reboot), or store = \"memory\" (kept until authbrokerd stops)"
    static let noSessionBus = "no D-Bus session bus: the Secret Service needs one; " + sessionBusAdvice
    static let noSecretService =
        "no Secret Service is running on the session bus: start gnome-keyring-daemon (or KeePassXC/KWallet with Secret Service enabled); on a host without a desktop keyring set store = \"kernel-keyring\" in config.toml (sign-ins kept until reboot), or store = \"memory\" (kept until authbrokerd stops)"
    static let locked =
        "the keyring is locked: unlock it (for example by logging in to the desktop, or with `gnome-keyring-daemon --unlock`) and try again"
    /// `locked` for gnome-keyring (and a store not named); another store's own words.
    static func locked(in store: String) -> String {
        switch store {
        case "KeePassXC": return "KeePassXC's database is locked: unlock it in KeePassXC (authbrokerd reads and writes its items as soon as it is unlocked)"
        case "KWallet": return "the wallet is closed: open it in KWallet (authbrokerd reads and writes its items as soon as it is open)"
        default: return locked
        }
    }
    static let noDefaultCollection =
        "the Secret Service has no default keyring: create one (for example with Seahorse, or by logging in to the desktop once so that the login keyring exists), or set store = \"memory\" in config.toml"
    static let cancelled = "the Secret Service request was cancelled"
    static let sessionBusClosed =
        "the D-Bus session bus closed authbrokerd's connection (the bus stopped or was restarted): authbrokerd connects again by itself as soon as the session bus and the Secret Service are back; do not restart authbrokerd meanwhile, since a refresh token it could not write yet is only in its memory"

    /// What went wrong, from the parts of a `GError`.
    ///
    /// - Parameters:
    ///   - message: the GError message.
    ///   - isLocked: the error is `SECRET_ERROR_IS_LOCKED`.
    ///   - isCancelled: the error is `G_IO_ERROR_CANCELLED`.
    ///   - duringSave: the call was a store into the default collection (a missing
    ///     collection object then means there is no default keyring).
    static func storeError(message: String, isLocked: Bool = false, isCancelled: Bool = false, duringSave: Bool = false) -> StoreError {
        if isCancelled {
            return .failed(cancelled)
        }
        if message.contains("Cannot autolaunch D-Bus without X11 $DISPLAY") || message.contains("DBUS_SESSION_BUS_ADDRESS")
            || message.contains("dbus-launch")
        {
            // No address: GLib tried X11 autolaunch (dbus-launch), which needs $DISPLAY.
            return .unavailable(noSessionBus)
        }
        if message.hasPrefix("Could not connect:") {
            // DBUS_SESSION_BUS_ADDRESS (or $XDG_RUNTIME_DIR/bus) names a bus that is gone.
            return .unavailable(
                "the D-Bus session bus cannot be reached (\(message)): check DBUS_SESSION_BUS_ADDRESS; the Secret Service needs a session bus: "
                    + sessionBusAdvice
            )
        }
        if message.contains("org.freedesktop.secrets") && message.contains("not provided by any .service files") {
            return .unavailable(noSecretService)
        }
        if message.contains("The connection is closed") {
            // Closed again right after the store opened a new connection: the bus is
            // going away or restarting; the next call connects again.
            return .unavailable(sessionBusClosed)
        }
        if isLocked || message.lowercased().contains("locked") {
            return .locked(locked)
        }
        if duringSave && message.contains("Object does not exist at path") && namesACollection(message) {
            // gnome-keyring without a login keyring: the "default" alias points at
            // /org/freedesktop/secrets/collection/login, which does not exist.
            return .unavailable(noDefaultCollection)
        }
        return .failed("the Secret Service failed: \(message)")
    }

    /// Whether the message names a collection object (`/org/freedesktop/secrets/collection/login`),
    /// not an item in one (`.../collection/login/12`).
    private static func namesACollection(_ message: String) -> Bool {
        let prefix = "/org/freedesktop/secrets/collection/"
        guard let range = message.firstRange(of: prefix) else { return false }
        let name = message[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
        guard !name.isEmpty else { return false }
        let after = message[range.upperBound...].dropFirst(name.count)
        return after.first != "/"
    }
}

/// The parts of a `GError` that matter here, copied out so the `GError` can be freed at once.
struct LibsecretError: Error, Sendable {
    var message: String
    var isLocked: Bool
    var isCancelled: Bool
    /// libsecret's connection to the service is stale: the keyring it was bound to is gone
    /// (its unique bus name, or the session opened there, no longer exists), or the bus
    /// connection was closed. GDBus and the keyring word these so; none of them is said
    /// when there simply is no keyring, which a new connection would not change.
    var isStaleConnection: Bool {
        !isCancelled
            && (message.contains("The name :") || message.contains("The connection is closed")
                || (message.contains("session") && message.contains("does not exist")))
    }

    /// The bus closed the connection the call used (the session bus stopped or restarted).
    var isClosedConnection: Bool {
        !isCancelled && message.contains("The connection is closed")
    }

    /// An object went away while it was used (another client deleted an item).
    var isVanished: Bool

    init(message: String, isLocked: Bool = false, isCancelled: Bool = false, isVanished: Bool = false) {
        self.message = message
        self.isLocked = isLocked
        self.isCancelled = isCancelled
        self.isVanished = isVanished
    }

    /// Copies and frees `error` (ownership is taken; the pointer is invalid afterwards).
    init(taking error: UnsafeMutablePointer<GError>) {
        defer { g_error_free(error) }
        message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        isLocked = authbroker_error_is_locked(error) != 0
        isCancelled = authbroker_error_is_cancelled(error) != 0
        isVanished = authbroker_error_is_vanished(error) != 0
    }

    func storeError(duringSave: Bool = false) -> StoreError {
        SecretServiceErrors.storeError(
            message: message, isLocked: isLocked, isCancelled: isCancelled, duringSave: duringSave
        )
    }
}
