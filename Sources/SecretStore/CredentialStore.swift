/// One stored credential: one item per account in the Secret Service.
///
/// The four identifying attributes are what the item is found by; `secret` is an opaque
/// payload (BrokerCore stores a small JSON document with the refresh token in it) that the
/// store never interprets, logs or prints.
public struct StoredCredential: Sendable, Equatable {
    public var provider: String
    public var issuer: String
    public var clientID: String
    public var subject: String
    /// Shown by Secret Service browsers (Seahorse, `secret-tool`): never contains a secret.
    public var label: String
    public var secret: String

    public init(provider: String, issuer: String, clientID: String, subject: String, label: String, secret: String) {
        self.provider = provider
        self.issuer = issuer
        self.clientID = clientID
        self.subject = subject
        self.label = label
        self.secret = secret
    }

    /// The identity of the item, without the secret.
    public var key: CredentialKey {
        CredentialKey(provider: provider, issuer: issuer, clientID: clientID, subject: subject)
    }
}

/// The attributes that identify one credential.
public struct CredentialKey: Sendable, Hashable {
    public var provider: String
    public var issuer: String
    public var clientID: String
    public var subject: String

    public init(provider: String, issuer: String, clientID: String, subject: String) {
        self.provider = provider
        self.issuer = issuer
        self.clientID = clientID
        self.subject = subject
    }
}

/// Why the store could not do what was asked. `message` is the sentence a user reads,
/// saying what is wrong and what to do; it never contains a secret.
public enum StoreError: Error, Sendable, Equatable {
    /// No D-Bus session bus, or no Secret Service on it.
    case unavailable(String)
    /// The collection is locked and could not be unlocked without a prompt.
    case locked(String)
    /// The Secret Service did not answer in time.
    case timedOut(seconds: Int)
    /// The Secret Service is asking the user (its own access prompt, such as KeePassXC's
    /// "Access Request") before it answers; the message names the store and what to allow.
    case prompting(String)
    /// Anything else libsecret reported.
    case failed(String)

    public var message: String {
        switch self {
        case .unavailable(let m), .locked(let m), .failed(let m), .prompting(let m): return m
        case .timedOut(let s):
            return "the Secret Service did not answer within \(s) s: check that gnome-keyring (or another Secret Service) is running and not waiting on a prompt"
        }
    }
}

extension StoreError {
    /// A short word for the kind of failure, for machines (`data.reason` of the daemon's -32005 answers).
    public var reason: String {
        switch self {
        case .unavailable: return "unavailable"
        case .locked: return "locked"
        case .timedOut: return "timed_out"
        case .prompting: return "prompt"
        case .failed: return "failed"
        }
    }
}

/// Where refresh tokens live. Implementations: `SecretServiceStore` (libsecret, schema
/// `org.authbroker.Credential`), `KernelKeyringStore` (the kernel's user keyring) and
/// `MemoryStore` (nothing persisted).
///
/// Every call may block on D-Bus in the real store: implementations run it off the
/// caller's thread and give up after their timeout, so a caller on an event loop is safe.
public protocol CredentialStore: Sendable {
    /// `secret-service`, `kernel-keyring` or `memory`, as `daemon.status` shows it.
    var kind: String { get }

    /// Checks that the store can be used now (service reachable, collection unlockable).
    func check() async throws(StoreError)

    /// Writes the credential, replacing the item with the same key if there is one.
    func save(_ credential: StoredCredential) async throws(StoreError)

    /// Every credential of the schema, secrets included.
    func loadAll() async throws(StoreError) -> [StoredCredential]

    /// Removes the item; returns whether there was one.
    @discardableResult
    func delete(_ key: CredentialKey) async throws(StoreError) -> Bool
}
