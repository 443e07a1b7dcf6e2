import CSecret

/// Keeps credentials in the freedesktop.org Secret Service (gnome-keyring, KeePassXC,
/// KWallet) through libsecret: one item per account, schema `org.authbroker.Credential`
/// with the string attributes `provider`, `issuer`, `client_id` and `subject`, stored in
/// the default collection (normally the "Login" keyring). Chosen with
/// `store = "secret-service"`.
///
/// libsecret's calls block on D-Bus (up to about 25 s when the service hangs). Every call
/// runs on a private serial queue, never on the caller's thread, and is abandoned after
/// `timeout` with `StoreError.timedOut`: the libsecret call is then cancelled and finishes
/// in the background, and its result is dropped.
///
/// The store talks to the Secret Service over a session-bus connection of its own
/// (`SecretServiceConnection`), opened at `DBUS_SESSION_BUS_ADDRESS` (or
/// `$XDG_RUNTIME_DIR/bus`) the first time it is used and again whenever the bus closed
/// it: a restarted session bus (or a restarted keyring on a live bus) is found again by
/// the next call.
public final class SecretServiceStore: CredentialStore {
    /// The libsecret schema name; also the value of the `xdg:schema` attribute of every item.
    public static let schemaName = "org.authbroker.Credential"

    /// How long one call may take before it fails with `StoreError.timedOut`.
    public let timeout: Duration

    /// - Parameter timeout: how long one Secret Service call may take (default 10 s).
    public init(timeout: Duration = .seconds(10)) {
        self.timeout = timeout
    }

    /// `secret-service`.
    public var kind: String { "secret-service" }

    /// Checks, without showing any prompt, that the session bus and a Secret Service on
    /// it answer and that the default collection exists and is unlocked.
    ///
    /// Throws `.unavailable` (no session bus, no Secret Service, no default keyring),
    /// `.locked` (the default keyring is locked: `save` would fail and `loadAll` would
    /// need an unlock prompt), `.timedOut` or `.failed`.
    public func check() async throws(StoreError) {
        try await BlockingCall.run(timeout: timeout) { cancellation -> Result<Void, StoreError> in
            let probed = SecretServiceConnection.shared.run(cancellation) { service -> Result<AuthbrokerStoreState, LibsecretError> in
                var error: UnsafeMutablePointer<GError>?
                let state = authbroker_secret_check(service, cancellation.pointer, &error)
                if let error { return .failure(LibsecretError(taking: error)) }
                return .success(state)
            }
            switch probed {
            case .failure(let failure):
                return .failure(failure.storeError())
            case .success(AUTHBROKER_STORE_READY):
                return .success(())
            case .success(AUTHBROKER_STORE_LOCKED):
                return .failure(.locked(SecretServiceErrors.locked(in: SecretServicePrompts.shared.store)))
            case .success(AUTHBROKER_STORE_NO_DEFAULT):
                return .failure(.unavailable(SecretServiceErrors.noDefaultCollection))
            case .success:
                return .failure(.failed("the Secret Service failed: unexpected answer while checking the default keyring"))
            }
        }
    }

    /// Stores the credential: an unlocked item with the same four attributes gets the new
    /// label and secret (SetSecret); otherwise the item is created in the default
    /// collection, replacing one with the same attributes there. gnome-keyring never
    /// prompts here (a locked default collection gives `.locked`); KeePassXC may ask the
    /// user (its access confirmation, or its database unlock), which gives `.prompting`
    /// or `.locked` at once (`SecretServicePrompts`).
    public func save(_ credential: StoredCredential) async throws(StoreError) {
        try Self.validate(credential.key)
        if credential.label.utf8.contains(0) {
            throw .failed("the credential's label contains a NUL character and cannot be stored")
        }
        if credential.secret.utf8.contains(0) {
            throw .failed("the credential's secret contains a NUL character and cannot be stored")
        }
        try await BlockingCall.run(timeout: timeout) { cancellation -> Result<Void, StoreError> in
            let stored = SecretServiceConnection.shared.run(cancellation) { service -> Result<Void, LibsecretError> in
                var error: UnsafeMutablePointer<GError>?
                // The Swift strings are handed to C as temporary C strings for the duration
                // of the call; libsecret copies the secret into its secure memory.
                // An unlocked item that is there already gets the secret with SetSecret
                // (no prompt at KeePassXC without access confirmation); a new one, or one
                // that is locked, goes through CreateItem, which may prompt.
                let updated = authbroker_secret_update(
                    service,
                    credential.label,
                    credential.provider,
                    credential.issuer,
                    credential.clientID,
                    credential.subject,
                    credential.secret,
                    cancellation.pointer,
                    &error
                )
                if let error { return .failure(LibsecretError(taking: error)) }
                if updated > 0 { return .success(()) }
                let stored = authbroker_secret_store(
                    service,
                    credential.label,
                    credential.provider,
                    credential.issuer,
                    credential.clientID,
                    credential.subject,
                    credential.secret,
                    cancellation.pointer,
                    &error
                )
                if let error { return .failure(LibsecretError(taking: error)) }
                if stored == 0 { return .failure(LibsecretError(message: "the item was not stored")) }
                return .success(())
            }
            return stored.mapError { $0.storeError(duringSave: true) }
        }
    }

    /// Every item of the schema in every collection, with its secret.
    ///
    /// Locked items make libsecret ask the Secret Service to unlock them (in a desktop
    /// session this shows the keyring's unlock prompt, bounded by `timeout`); if they stay
    /// locked this throws `.locked`. Items of the schema that lack one of the four
    /// attributes (not written by authbroker) are skipped.
    public func loadAll() async throws(StoreError) -> [StoredCredential] {
        try await BlockingCall.run(timeout: timeout) { cancellation -> Result<[StoredCredential], StoreError> in
            // Another client may delete an item between the search and the reading of its
            // properties ("No such secret item at path ..."): search again.
            var attempt = 1
            while true {
                switch SecretServiceConnection.shared.run(cancellation, { Self.searchAll($0, cancellation: cancellation) }) {
                case .success(let credentials):
                    return .success(credentials)
                case .failure(let failure) where failure.isVanished && attempt < Self.searchAttempts:
                    attempt += 1
                case .failure(let failure):
                    return .failure(failure.storeError())
                }
            }
        }
    }

    /// Removes the item(s) with this key from every collection; returns whether one was
    /// removed. Throws `.locked` if the item is there but in a locked collection.
    @discardableResult
    public func delete(_ key: CredentialKey) async throws(StoreError) -> Bool {
        try Self.validate(key)
        return try await BlockingCall.run(timeout: timeout) { cancellation -> Result<Bool, StoreError> in
            var attempt = 1
            while true {
                switch SecretServiceConnection.shared.run(cancellation, { Self.clear(key, in: $0, cancellation: cancellation) }) {
                case .success(let removed):
                    return .success(removed)
                case .failure(let failure) where failure.isVanished && attempt < Self.searchAttempts:
                    attempt += 1  // another client deleted a matching item meanwhile
                case .failure(let failure):
                    return .failure(failure.storeError())
                }
            }
        }
    }

    // MARK: - Private

    /// Attribute values go to C as C strings: a NUL would silently cut them short.
    private static func validate(_ key: CredentialKey) throws(StoreError) {
        for (name, value) in [("provider", key.provider), ("issuer", key.issuer), ("client_id", key.clientID), ("subject", key.subject)]
        where value.utf8.contains(0) {
            throw .failed("the credential's \(name) contains a NUL character and cannot be stored")
        }
    }

    /// Removes the items with this key; runs on the libsecret queue. A `.locked` answer
    /// comes back as a `LibsecretError` with `isLocked`.
    private static func clear(
        _ key: CredentialKey, in service: UnsafeMutablePointer<SecretService>, cancellation: OperationCancellation
    ) -> Result<Bool, LibsecretError> {
        var error: UnsafeMutablePointer<GError>?
        let removed = authbroker_secret_clear(
            service, key.provider, key.issuer, key.clientID, key.subject, cancellation.pointer, &error
        )
        if let error {
            return .failure(LibsecretError(taking: error))
        }
        if removed != 0 {
            return .success(true)
        }
        // Nothing removed: there was no item, or only a locked one, which libsecret
        // skips without saying so.
        let exists = authbroker_secret_exists(
            service, key.provider, key.issuer, key.clientID, key.subject, cancellation.pointer, &error
        )
        if let error {
            return .failure(LibsecretError(taking: error))
        }
        if exists > 0 {
            return .failure(LibsecretError(message: "the item is in a locked collection", isLocked: true))
        }
        return .success(false)
    }

    /// How often `loadAll` and `delete` try when items vanish under them.
    private static let searchAttempts = 3

    /// One search of every item with its secret. Runs on the libsecret queue.
    private static func searchAll(
        _ service: UnsafeMutablePointer<SecretService>, cancellation: OperationCancellation
    ) -> Result<[StoredCredential], LibsecretError> {
        var error: UnsafeMutablePointer<GError>?
        let list = authbroker_secret_search_all(service, cancellation.pointer, &error)
        defer { authbroker_object_list_free(list) }
        if let error {
            return .failure(LibsecretError(taking: error))
        }
        var credentials: [StoredCredential] = []
        var node = list
        while let current = node {
            node = current.pointee.next
            guard let data = current.pointee.data else { continue }
            switch credential(from: OpaquePointer(data), cancellation: cancellation) {
            case .success(let credential?):
                credentials.append(credential)
            case .success(nil):
                continue
            case .failure(let failure) where failure.isVanished:
                continue  // deleted by another client since the search
            case .failure(let failure):
                return .failure(failure)
            }
        }
        return .success(credentials)
    }

    /// Reads one search result (a `SecretRetrievable`). `nil` if it lacks an attribute.
    /// Runs on the libsecret queue.
    private static func credential(
        from retrievable: OpaquePointer,
        cancellation: OperationCancellation
    ) -> Result<StoredCredential?, LibsecretError> {
        guard let attributes = secret_retrievable_get_attributes(retrievable) else {
            return .success(nil)
        }
        defer { g_hash_table_unref(attributes) }
        func attribute(_ name: String) -> String? {
            authbroker_attributes_get(attributes, name).map { String(cString: $0) }
        }
        guard let provider = attribute("provider"),
              let issuer = attribute("issuer"),
              let clientID = attribute("client_id"),
              let subject = attribute("subject")
        else {
            return .success(nil)
        }
        // The search is by schema already; this guards against a backend that ignores it.
        if let schema = attribute("xdg:schema"), schema != schemaName {
            return .success(nil)
        }

        var label = ""
        if let rawLabel = secret_retrievable_get_label(retrievable) {
            label = String(cString: rawLabel)
            g_free(rawLabel)
        }

        var error: UnsafeMutablePointer<GError>?
        let value = authbroker_retrievable_secret(retrievable, cancellation.pointer, &error)
        if let error {
            if let value { secret_value_unref(UnsafeMutableRawPointer(value)) }
            return .failure(LibsecretError(taking: error))
        }
        guard let value else {
            return .success(nil)  // not reached: the shim sets an error with NULL
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        // The bytes live in libsecret's secure memory until the unref; decode them once.
        var length = 0
        let secret: String
        if let bytes = secret_value_get(value, &length) {
            secret = String(decoding: UnsafeRawBufferPointer(start: bytes, count: length), as: UTF8.self)
        } else {
            secret = ""
        }

        return .success(StoredCredential(
            provider: provider, issuer: issuer, clientID: clientID, subject: subject,
            label: label, secret: secret
        ))
    }
}
