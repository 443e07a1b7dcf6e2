import COpenSSL

/// A secret the user typed (a password, a one-time code), held in one buffer of its own
/// that is wiped when the last reference goes: a Swift `String` or `Array` would leave
/// copies in freed heap memory for as long as nothing reuses it, where a core dump or
/// a reader of `/proc/PID/mem` finds them (docs/security.md).
public final class SecretBytes: @unchecked Sendable {
    // Written only in init; read-only afterwards, so sharing it between tasks is safe.
    private let storage: UnsafeMutableRawBufferPointer

    /// Takes `count` bytes that `fill` writes; `fill` returns how many it wrote.
    public init(capacity: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 1), alignment: 1)
        let written = fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<capacity]))
        storage = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(max(written, 0), capacity)])
        base = buffer
    }

    /// Copies `bytes` in.
    public convenience init(copying bytes: some Collection<UInt8>) {
        self.init(capacity: bytes.count) { buffer in
            buffer.copyBytes(from: bytes)
            return bytes.count
        }
    }

    private let base: UnsafeMutableRawBufferPointer

    deinit {
        SecretBytes.wipe(base)
        base.deallocate()
    }

    public var count: Int { storage.count }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage))
    }

    /// The bytes as text, for answers that are not secret (a user name): the copy is the
    /// caller's to keep.
    public var text: String {
        withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Overwrites `buffer` with zeros in a way the compiler cannot leave out.
    public static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let start = buffer.baseAddress, buffer.count > 0 else { return }
        OPENSSL_cleanse(start, buffer.count)
    }

    /// Overwrites the storage of `array` in place, also while other arrays share it (a
    /// request body a worker thread has not let go of yet): call it only when none of them
    /// needs the bytes any more. Mutating the array instead would copy a shared storage
    /// and wipe only the copy.
    public static func wipe(_ array: [UInt8]) {
        array.withUnsafeBytes { wipe(UnsafeMutableRawBufferPointer(mutating: $0)) }
    }
}
