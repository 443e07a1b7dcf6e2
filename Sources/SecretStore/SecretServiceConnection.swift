import CSecret

/// The Secret Service client of the process: a D-Bus connection to the session bus that
/// the store owns, and libsecret's `SecretService` proxy built on it. Made the first time
/// a call needs it; the proxy is made again when libsecret's view of the keyring is stale
/// (the keyring restarted on a live bus), and the connection too when the bus closed it
/// (the session bus restarted).
///
/// Why not libsecret's default proxy: it sits on GIO's shared session connection
/// (`g_bus_get_sync`), which GIO keeps handing out after the bus closed it, so after a
/// restart of the session bus every call failed with "The connection is closed" until
/// the process restarted, and rotated refresh tokens held in memory were lost with that
/// restart. A connection of our own is opened again at the same address
/// (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`) as soon as a bus listens
/// there again.
///
/// Confined to `BlockingCall.queue` (one libsecret call at a time in the process), which
/// is what makes the unchecked `Sendable` sound. The proxies' signal subscriptions (the
/// Secret Service's name owner, item properties) are delivered on a main context of the
/// store's own, pushed as the thread-default around each call and run without blocking
/// before and after it, so nothing piles up on a context nobody runs.
final class SecretServiceConnection: @unchecked Sendable {
    /// The one client of the process (libsecret calls are serialised on one queue anyway).
    static let shared = SecretServiceConnection()

    private let context: OpaquePointer
    private var connection: OpaquePointer?
    private var service: UnsafeMutablePointer<SecretService>?

    /// How many bus connections and proxies were made so far (tests read them on the queue).
    private(set) var connectionsOpened = 0
    private(set) var servicesOpened = 0

    init() {
        context = g_main_context_new()
    }

    deinit {
        drop(connectionToo: true)
        g_main_context_unref(context)
    }

    /// Runs one libsecret operation with the current proxy, making the connection and the
    /// proxy first if there are none or the bus closed the connection. When the operation
    /// fails because the proxy or the connection is stale, they are dropped and made again,
    /// and the operation runs once more.
    ///
    /// Only for those errors (and a closed connection): a keyring that is simply not on
    /// the bus keeps the connection and proxy, so a daemon polling for a keyring that never
    /// comes makes nothing new every few seconds.
    func run<T>(
        _ cancellation: OperationCancellation,
        _ operation: (UnsafeMutablePointer<SecretService>) -> Result<T, LibsecretError>
    ) -> Result<T, LibsecretError> {
        g_main_context_push_thread_default(context)
        defer {
            authbroker_context_drain(context)
            g_main_context_pop_thread_default(context)
        }
        authbroker_context_drain(context)

        let first: Result<T, LibsecretError>
        switch current(cancellation) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let service):
            first = operation(service)
        }
        guard case .failure(let failure) = first, failure.isStaleConnection else { return first }
        drop(connectionToo: authbroker_bus_is_closed(connection) != 0 || failure.isClosedConnection)
        switch current(cancellation) {
        case .failure(let failure):
            return .failure(failure)
        case .success(let service):
            return operation(service)
        }
    }

    /// The proxy, made (with the connection) if needed.
    private func current(_ cancellation: OperationCancellation) -> Result<UnsafeMutablePointer<SecretService>, LibsecretError> {
        if authbroker_bus_is_closed(connection) != 0 {
            drop(connectionToo: true)
        }
        if let service { return .success(service) }
        var error: UnsafeMutablePointer<GError>?
        if connection == nil {
            guard let opened = authbroker_bus_open(cancellation.pointer, &error) else {
                return .failure(error.map { LibsecretError(taking: $0) } ?? LibsecretError(message: "could not connect to the session bus"))
            }
            connection = opened
            connectionsOpened += 1
        }
        let prompts = Unmanaged.passUnretained(SecretServicePrompts.shared).toOpaque()
        guard let opened = authbroker_service_open(connection, secretServicePromptCallback, prompts, cancellation.pointer, &error) else {
            return .failure(error.map { LibsecretError(taking: $0) } ?? LibsecretError(message: "could not connect to the Secret Service"))
        }
        service = opened
        servicesOpened += 1
        // Which program serves the Secret Service, for the sentences about its prompts.
        let process = authbroker_bus_owner_process(connection, authbroker_service_bus_name(opened), 1000)
        SecretServicePrompts.shared.serving(process: process.map { String(cString: $0) })
        g_free(process)
        return .success(opened)
    }

    /// Drops the proxy (its session with the keyring goes with it) and, with
    /// `connectionToo`, the connection (closing it if the bus has not).
    private func drop(connectionToo: Bool) {
        if let service {
            g_object_unref(service)
            self.service = nil
        }
        if connectionToo, let connection {
            g_dbus_connection_close_sync(connection, nil, nil)
            g_object_unref(UnsafeMutableRawPointer(connection))
            self.connection = nil
        }
        authbroker_context_drain(context)
    }
}
