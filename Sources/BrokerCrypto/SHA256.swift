import COpenSSL

/// SHA-256 (FIPS 180-4) through OpenSSL's EVP interface.
public enum SHA256 {
    /// The digest length in bytes.
    public static let digestLength = 32

    /// Returns the 32-byte SHA-256 digest of `bytes`.
    ///
    /// OpenSSL's built-in SHA-256 does not fail for in-memory input; should it ever (a
    /// provider configuration that disables it), the process stops rather than return a
    /// wrong digest.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        guard ok == 1, Int(length) == digestLength else {
            preconditionFailure("OpenSSL could not compute SHA-256")
        }
        return Array(digest.prefix(digestLength))
    }
}
