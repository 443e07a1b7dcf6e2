import BrokerCrypto
import NIOCore

extension ByteBuffer {
    /// Overwrites the readable bytes where they lie, in storage other buffers may share (the
    /// slices of one read): for bytes that may be a secret and are done with.
    func wipeReadableBytes() {
        withUnsafeReadableBytes { SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: $0)) }
    }
}
