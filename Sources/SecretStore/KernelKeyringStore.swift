#if canImport(Glibc)
import Glibc
#endif
import CKeyring

/// Keeps credentials in the kernel's key retention service (keyrings(7)), for hosts with no
/// unlocked Secret Service (a server reached by ssh). Chosen with `store = "kernel-keyring"`,
/// never as a fallback.
///
/// Each credential is one key of type "user" in the keyring `authbroker`, itself linked in
/// the user keyring (`@u`): the key's description carries the four attributes
/// (`authbroker:` then `provider`, `issuer`, `client_id` and `subject`, percent-encoded,
/// separated by spaces), its payload the label and the secret separated by a NUL. The
/// kernel holds them in memory only: they survive a restart of the daemon and the end of
/// the user's sessions, not a reboot (docs/security.md, "The kernel keyring").
///
/// Reached through the system calls add_key(2) and keyctl(2) (the CKeyring shim), which
/// never block: no queue and no timeout, unlike `SecretServiceStore`.
///
/// Every key expires `keyTTL` seconds after it was last saved, loaded or renewed
/// (`renewAll()`, which the daemon calls while it runs): the user keyring belongs to the
/// uid number, not to the account, so keys with no expiry would be read by the next
/// account given that uid after `userdel` (docs/security.md, "The kernel keyring").
public final class KernelKeyringStore: CredentialStore {
    /// The keyring in `@u` that holds the items.
    public let keyringName: String
    /// Seconds each key lives after it was last saved, loaded or renewed; 0: no expiry
    /// (`[daemon] kernel_keyring_ttl`).
    public let keyTTL: UInt32

    /// 30 days: a daemon that runs renews its keys (each day at the most), so only the keys
    /// of a user whose daemon has not run for a month expire.
    public static let defaultTTL: UInt32 = 30 * 86_400

    /// - Parameter keyringName: the keyring in the user keyring (tests use one of their own).
    /// - Parameter keyTTL: seconds each key lives unless renewed; 0 for no expiry.
    public init(keyringName: String = "authbroker", keyTTL: UInt32 = KernelKeyringStore.defaultTTL) {
        self.keyringName = keyringName
        self.keyTTL = keyTTL
    }

    /// How often a running daemon should call `renewAll()`: well inside the keys' life.
    public var renewalInterval: Duration? {
        keyTTL == 0 ? nil : .seconds(max(1, min(Int(keyTTL) / 4, 86_400)))
    }

    /// `kernel-keyring`.
    public var kind: String { "kernel-keyring" }

    /// The largest payload of a "user" key (the kernel refuses more).
    static let maximumPayload = 32_767
    /// The prefix of the description of every item.
    static let prefix = "authbroker:"

    /// Checks that the kernel lets this process use its user keyring, creating the
    /// `authbroker` keyring there if needed.
    public func check() async throws(StoreError) {
        _ = try keyring()
    }

    /// Adds the credential, or replaces the payload of the item with the same key (the
    /// kernel does that in one step: a reader sees the old item or the new one).
    public func save(_ credential: StoredCredential) async throws(StoreError) {
        let description = try Self.description(of: credential.key)
        for (name, value) in [("label", credential.label), ("secret", credential.secret)] where value.utf8.contains(0) {
            throw .failed("the credential's \(name) contains a NUL character and cannot be stored")
        }
        var payload = Array(credential.label.utf8)
        payload.append(0)
        payload += credential.secret.utf8
        defer { payload.withUnsafeMutableBytes { buffer in _ = buffer.initializeMemory(as: UInt8.self, repeating: 0) } }
        guard payload.count <= Self.maximumPayload else {
            throw .failed("the credential is too large for the kernel keyring (\(payload.count) bytes, at most \(Self.maximumPayload))")
        }
        let ring = try keyring()
        let added = payload.withUnsafeBytes { ckeyring_add_user_key(ring, description, $0.baseAddress, $0.count) }
        if added < 0 { throw Self.error(-added, doing: "store the credential") }
        // A replaced payload keeps the key's old expiry: set anew on every save.
        let timed = ckeyring_set_timeout(added, keyTTL)
        if timed < 0 { throw Self.error(-timed, doing: "set the credential's expiry") }
    }

    /// Gives every item of the keyring `keyTTL` seconds more to live, from now. Returns how
    /// many were renewed.
    @discardableResult
    public func renewAll() throws(StoreError) -> Int {
        let ring = try keyring()
        var renewed = 0
        for key in try Self.serials(in: ring) {
            guard let described = try Self.describe(key), Self.attributes(of: described) != nil else { continue }
            if try renew(key) { renewed += 1 }
        }
        return renewed
    }

    /// Sets the key's expiry `keyTTL` from now; false when it is gone.
    private func renew(_ key: Int32) throws(StoreError) -> Bool {
        let timed = ckeyring_set_timeout(key, keyTTL)
        if timed == -ENOKEY || timed == -EKEYREVOKED || timed == -EKEYEXPIRED { return false }
        if timed < 0 { throw Self.error(-timed, doing: "renew a credential's expiry") }
        return true
    }

    /// Every item of the keyring whose description is one of authbroker's.
    public func loadAll() async throws(StoreError) -> [StoredCredential] {
        let ring = try keyring()
        var credentials: [StoredCredential] = []
        for key in try Self.serials(in: ring) {
            // A key invalidated since the listing (another process's delete) is skipped.
            guard let described = try Self.describe(key), let attributes = Self.attributes(of: described) else { continue }
            guard var payload = try Self.readIfPresent(key) else { continue }
            // Loaded is in use: it lives `keyTTL` from now.
            _ = try renew(key)
            // Wiped in place: no slice of it may outlive the decoding (a live slice would make
            // the wipe copy the buffer and leave the original unwiped).
            defer { payload.withUnsafeMutableBytes { buffer in _ = buffer.initializeMemory(as: UInt8.self, repeating: 0) } }
            let split = payload.firstIndex(of: 0) ?? payload.endIndex
            let label = String(decoding: payload[..<split], as: UTF8.self)
            let secret = split < payload.endIndex ? String(decoding: payload[(split + 1)...], as: UTF8.self) : ""
            credentials.append(StoredCredential(
                provider: attributes.provider, issuer: attributes.issuer, clientID: attributes.clientID, subject: attributes.subject,
                label: label, secret: secret))
        }
        return credentials
    }

    /// Destroys the item with this key at once (KEYCTL_INVALIDATE: the kernel drops its
    /// payload, wherever it was linked); returns whether there was one.
    @discardableResult
    public func delete(_ key: CredentialKey) async throws(StoreError) -> Bool {
        let description = try Self.description(of: key)
        let ring = try keyring()
        let found = ckeyring_search_user_key(ring, description)
        if found == -ENOKEY || found == -EKEYREVOKED || found == -EKEYEXPIRED { return false }
        if found < 0 { throw Self.error(-found, doing: "find the credential") }
        let invalidated = ckeyring_invalidate(found)
        if invalidated == -ENOKEY { return false }  // deleted by another process meanwhile
        if invalidated < 0 { throw Self.error(-invalidated, doing: "remove the credential") }
        return true
    }

    /// Unlinks and destroys the whole keyring (tests).
    func removeKeyring() {
        guard let ring = try? keyring() else { return }
        _ = ckeyring_invalidate(ring)
    }

    // MARK: - Private

    /// The serial of the `authbroker` keyring, made possessed by this process first: keys
    /// grant their possessor everything and the user only "view" (the kernel's default), and
    /// a process whose session keyring does not lead to `@u` (systemd's KeyringMode=private,
    /// which authbroker.service sets, `keyctl session`, cron) would otherwise be refused.
    private func keyring() throws(StoreError) -> Int32 {
        let possessed = ckeyring_possess_user_keyring()
        if possessed < 0 { throw Self.error(-possessed, doing: "open the user keyring") }
        let ring = ckeyring_named_keyring(keyringName)
        if ring < 0 { throw Self.error(-ring, doing: "open the keyring \"\(keyringName)\"") }
        return ring
    }

    /// `authbroker:` and the four attributes, each percent-encoded, separated by spaces.
    static func description(of key: CredentialKey) throws(StoreError) -> String {
        var text = prefix
        for (index, (name, value)) in [("provider", key.provider), ("issuer", key.issuer), ("client_id", key.clientID), ("subject", key.subject)].enumerated() {
            if value.utf8.contains(0) { throw .failed("the credential's \(name) contains a NUL character and cannot be stored") }
            if index > 0 { text += " " }
            text += percentEncoded(value)
        }
        // The kernel's limit for a description (4095 bytes and the NUL).
        guard text.utf8.count < 4096 else {
            throw .failed("the credential's provider, issuer, client_id and subject are too long for the kernel keyring (\(text.utf8.count) bytes, at most 4095)")
        }
        return text
    }

    /// The attributes a description holds; nil if it is not one of authbroker's.
    static func attributes(of description: String) -> CredentialKey? {
        guard description.hasPrefix(prefix) else { return nil }
        let fields = description.dropFirst(prefix.count).split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 4 else { return nil }
        let values = fields.compactMap { percentDecoded($0) }
        guard values.count == 4 else { return nil }
        return CredentialKey(provider: values[0], issuer: values[1], clientID: values[2], subject: values[3])
    }

    /// Spaces (the separator), `%`, control characters and DEL become `%XX`.
    static func percentEncoded(_ value: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in value.utf8 {
            if byte <= 0x20 || byte == 0x25 || byte == 0x7F {
                bytes += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        func hex(_ byte: UInt8?) -> UInt8? {
            switch byte {
            case let b? where (0x30...0x39).contains(b): return b - 0x30
            case let b? where (0x41...0x46).contains(b): return b - 0x41 + 10
            default: return nil
            }
        }
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// "type;uid;gid;perm;description" of a key: its description if its type is "user";
    /// nil when it is of another type or gone.
    private static func describe(_ key: Int32) throws(StoreError) -> String? {
        var buffer = [CChar](repeating: 0, count: 4200)
        let length = buffer.withUnsafeMutableBufferPointer { ckeyring_describe(key, $0.baseAddress, $0.count) }
        if length == -Int(ENOKEY) || length == -Int(EKEYREVOKED) || length == -Int(EKEYEXPIRED) { return nil }
        if length < 0 { throw error(Int32(-length), doing: "read a key's description") }
        guard length <= buffer.count else { return nil }  // longer than any of ours
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let parts = text.split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "user" else { return nil }
        return String(parts[4])
    }

    /// A key's payload; nil when the key is gone.
    private static func readIfPresent(_ key: Int32) throws(StoreError) -> [UInt8]? {
        switch read(key) {
        case .success(let bytes): return bytes
        case .failure(let failure) where [ENOKEY, EKEYREVOKED, EKEYEXPIRED].contains(failure.code): return nil
        case .failure(let failure): throw error(failure.code, doing: "read a credential")
        }
    }

    /// The serials of the keys in a keyring.
    private static func serials(in ring: Int32) throws(StoreError) -> [Int32] {
        let bytes: [UInt8]
        switch read(ring) {
        case .success(let read): bytes = read
        case .failure(let failure): throw error(failure.code, doing: "list the keyring")
        }
        // Native-endian 32-bit serials.
        return stride(from: 0, to: bytes.count - 3, by: 4).map { offset in
            bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int32.self) }
        }
    }

    /// A failed system call's errno.
    struct Errno: Error {
        let code: Int32
    }

    /// The whole payload of a key, or the errno.
    private static func read(_ key: Int32) -> Result<[UInt8], Errno> {
        var capacity = 4096
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let length = buffer.withUnsafeMutableBytes { ckeyring_read(key, $0.baseAddress, $0.count) }
            if length < 0 { return .failure(Errno(code: Int32(-length))) }
            if length <= capacity {
                buffer.removeSubrange(length...)
                return .success(buffer)
            }
            // It grew between the calls: wipe what was read, ask again with room for it.
            buffer.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) }
            capacity = length
        }
    }

    /// The sentence for a failed system call.
    static func error(_ code: Int32, doing action: String) -> StoreError {
        switch code {
        case ENOSYS:
            return .unavailable("the kernel keyring is not available (this kernel has no key retention service): choose store = \"secret-service\" or \"memory\" in config.toml")
        case EPERM:
            return .unavailable("the kernel refused to \(action) (a system-call filter, such as a container's seccomp profile, may block add_key and keyctl): allow them, or choose another store in config.toml")
        case EACCES:
            return .unavailable("the kernel keyring refused to \(action): its keys' permissions do not let this process in (`keyctl show @u` shows them)")
        case EDQUOT:
            return .failed("the kernel keyring could not \(action): this user's key quota is full (see `keyctl show @u`; the sysctls kernel.keys.maxkeys and kernel.keys.maxbytes set it)")
        default:
            return .failed("the kernel keyring could not \(action): \(String(cString: strerror(code)))")
        }
    }
}
