import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// Cryptographically secure random bytes, for state, nonce, PKCE verifiers and the like.
public enum SecureRandom {
    /// Returns `count` random bytes from OpenSSL's `RAND_bytes`; should that fail (an
    /// unseeded or broken DRBG), from the kernel's `getrandom(2)`, then `/dev/urandom`.
    ///
    /// It never returns predictable bytes: if none of the three sources works, which on
    /// Linux ≥ 3.17 cannot happen short of a broken system, it stops the process.
    public static func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: count)
        let filled = buffer.withUnsafeMutableBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return false }
            if count <= Int(Int32.max), RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(count)) == 1 {
                return true
            }
            return kernelRandom(raw) || urandom(raw)
        }
        guard filled else { preconditionFailure("no source of secure random bytes is available") }
        return buffer
    }

    /// Returns a random base64url string carrying `bytes` random bytes (256 bits by default).
    public static func token(bytes: Int = 32) -> String {
        Base64URL.encode(self.bytes(bytes))
    }

    private static func kernelRandom(_ raw: UnsafeMutableRawBufferPointer) -> Bool {
        #if os(Linux)
        return fill(raw) { getrandom($0, $1, 0) }
        #else
        return false
        #endif
    }

    private static func urandom(_ raw: UnsafeMutableRawBufferPointer) -> Bool {
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fill(raw) { read(fd, $0, $1) }
    }

    /// Calls `source` until `raw` is full, again after EINTR; false on any other failure.
    private static func fill(_ raw: UnsafeMutableRawBufferPointer, _ source: (UnsafeMutableRawPointer, Int) -> Int) -> Bool {
        guard let base = raw.baseAddress else { return false }
        var offset = 0
        while offset < raw.count {
            let got = source(base + offset, raw.count - offset)
            if got > 0 {
                offset += got
            } else if got < 0, errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }
}
