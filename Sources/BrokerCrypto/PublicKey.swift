import COpenSSL

/// A public key for JWS verification, held as an OpenSSL `EVP_PKEY`.
///
/// Keys are made only from their public components (RFC 7518 §6, RFC 8037 §2) and checked
/// on the way in: RSA moduli of 2048 to 8192 bits with an odd exponent of at most 64 bits,
/// EC points of exactly the curve's size that lie on the curve, Ed25519 keys of 32 bytes.
/// Anything else is a `CryptoError.invalidKey`, never a crash.
///
/// The key is immutable once made; OpenSSL allows concurrent verification with one
/// `EVP_PKEY`, so instances are shared freely between tasks.
public final class PublicKey: @unchecked Sendable {
    /// What kind of key this is.
    public enum Kind: Sendable, Equatable {
        /// RSA, with the modulus size in bits.
        case rsa(modulusBits: Int)
        /// ECDSA on one of the accepted curves.
        case ec(ECCurve)
        /// Ed25519.
        case ed25519
    }

    /// The smallest RSA modulus accepted (RFC 7518 §3.3 requires at least 2048 bits).
    public static let minimumRSABits = 2048
    /// The largest RSA modulus accepted: larger keys only cost verification time.
    public static let maximumRSABits = 8192

    /// The kind of key, which decides the algorithms it can verify.
    public let kind: Kind
    /// The owned `EVP_PKEY *`.
    let pkey: OpaquePointer

    private init(pkey: OpaquePointer, kind: Kind) {
        self.pkey = pkey
        self.kind = kind
    }

    deinit { EVP_PKEY_free(pkey) }

    /// True when this key can verify signatures made with `algorithm`: RSA for RS256 and
    /// PS256, P-256 for ES256, P-384 for ES384, Ed25519 for EdDSA.
    public func fits(_ algorithm: JWSAlgorithm) -> Bool {
        switch (algorithm, kind) {
        case (.rs256, .rsa), (.ps256, .rsa), (.es256, .ec(.p256)), (.es384, .ec(.p384)), (.edDSA, .ed25519): return true
        default: return false
        }
    }

    /// An RSA public key from the big-endian modulus `n` and exponent `e` (leading zero
    /// bytes are ignored).
    public static func rsa(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) -> PublicKey {
        let n = Array(modulus.drop(while: { $0 == 0 }))
        let e = Array(exponent.drop(while: { $0 == 0 }))
        let bits = bitLength(n)
        guard bits >= minimumRSABits, bits <= maximumRSABits else {
            throw .invalidKey("the RSA key has a \(bits)-bit modulus; authbroker accepts \(minimumRSABits) to \(maximumRSABits) bits, so the provider must publish a stronger key")
        }
        guard n[n.count - 1] & 1 == 1 else { throw .invalidKey("the RSA key's modulus is even, so it is not an RSA key") }
        guard !e.isEmpty, e.count <= 8, e[e.count - 1] & 1 == 1, e != [1] else {
            throw .invalidKey("the RSA key's exponent must be an odd number from 3 up to 64 bits")
        }
        guard let nNumber = bignum(n) else { throw .invalidKey("OpenSSL could not read the RSA modulus") }
        defer { BN_free(nNumber) }
        guard let eNumber = bignum(e) else { throw .invalidKey("OpenSSL could not read the RSA exponent") }
        defer { BN_free(eNumber) }
        let built = withBuilder { builder in
            OSSL_PARAM_BLD_push_BN(builder, AB_OSSL_PKEY_PARAM_RSA_N, nNumber) == 1
                && OSSL_PARAM_BLD_push_BN(builder, AB_OSSL_PKEY_PARAM_RSA_E, eNumber) == 1
        }
        return try fromData(built, type: AB_KEYTYPE_RSA, kind: .rsa(modulusBits: bits), what: "RSA key")
    }

    /// An EC public key on `curve` from its affine coordinates, each exactly
    /// `curve.coordinateLength` bytes (RFC 7518 §6.2.1.2). A point off the curve is refused.
    public static func ec(curve: ECCurve, x: [UInt8], y: [UInt8]) throws(CryptoError) -> PublicKey {
        let length = curve.coordinateLength
        guard x.count == length, y.count == length else {
            throw .invalidKey("a \(curve.rawValue) key needs x and y of \(length) bytes each; this one has \(x.count) and \(y.count)")
        }
        // The uncompressed point encoding of SEC 1 §2.3.3.
        let point: [UInt8] = [0x04] + x + y
        let group = curve == .p256 ? AB_SN_X9_62_PRIME256V1 : AB_SN_SECP384R1
        let built = point.withUnsafeBytes { bytes in
            // OSSL_PARAM_BLD keeps pointers to the name and the bytes until to_param:
            // both live until withBuilder returns, inside this closure.
            withBuilder { builder in
                OSSL_PARAM_BLD_push_utf8_string(builder, AB_OSSL_PKEY_PARAM_GROUP_NAME, group, 0) == 1
                    && OSSL_PARAM_BLD_push_octet_string(builder, AB_OSSL_PKEY_PARAM_PUB_KEY, bytes.baseAddress, bytes.count) == 1
            }
        }
        let key = try fromData(built, type: AB_KEYTYPE_EC, kind: .ec(curve), what: "\(curve.rawValue) key")
        try key.checkPublic(what: "\(curve.rawValue) key")
        return key
    }

    /// An Ed25519 public key from its 32 bytes (RFC 8037 §2).
    public static func ed25519(_ x: [UInt8]) throws(CryptoError) -> PublicKey {
        guard x.count == 32 else { throw .invalidKey("an Ed25519 key has 32 bytes; this one has \(x.count)") }
        let built = x.withUnsafeBytes { bytes in
            withBuilder { builder in
                OSSL_PARAM_BLD_push_octet_string(builder, AB_OSSL_PKEY_PARAM_PUB_KEY, bytes.baseAddress, bytes.count) == 1
            }
        }
        return try fromData(built, type: AB_KEYTYPE_ED25519, kind: .ed25519, what: "Ed25519 key")
    }

    // MARK: - OpenSSL plumbing

    /// Parameters made by `OSSL_PARAM_BLD_to_param`, owned by the caller, or nil on failure.
    private struct BuiltParameters {
        var params: UnsafeMutablePointer<OSSL_PARAM>?
    }

    /// Runs `push` on a fresh builder and turns it into parameters. The builder is freed
    /// here; the parameters are self-contained copies, so the pushed buffers may go away
    /// once this returns.
    private static func withBuilder(_ push: (OpaquePointer) -> Bool) -> BuiltParameters {
        guard let builder = OSSL_PARAM_BLD_new() else { return BuiltParameters(params: nil) }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard push(builder) else { return BuiltParameters(params: nil) }
        return BuiltParameters(params: OSSL_PARAM_BLD_to_param(builder))
    }

    /// Makes the key from `built` (freed here) with `EVP_PKEY_fromdata`.
    private static func fromData(_ built: BuiltParameters, type: UnsafePointer<CChar>, kind: Kind,
                                 what: String) throws(CryptoError) -> PublicKey {
        defer {
            OSSL_PARAM_free(built.params)
            ERR_clear_error()
        }
        guard let params = built.params else { throw .invalidKey("OpenSSL could not take the \(what)'s parameters") }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw .invalidKey("OpenSSL cannot make an \(what): check the system's OpenSSL installation")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
              EVP_PKEY_fromdata(context, &made, AB_EVP_PKEY_PUBLIC_KEY, params) == 1,
              let pkey = made
        else {
            EVP_PKEY_free(made)
            throw .invalidKey("the \(what) is not valid")
        }
        return PublicKey(pkey: pkey, kind: kind)
    }

    /// `EVP_PKEY_public_check`: for EC keys, that the point lies on the curve.
    private func checkPublic(what: String) throws(CryptoError) {
        defer { ERR_clear_error() }
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw .invalidKey("OpenSSL could not check the \(what)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_public_check(context) == 1 else { throw .invalidKey("the \(what) is not a point on its curve") }
    }

    /// A new BIGNUM (free it with BN_free) holding the big-endian `bytes`.
    private static func bignum(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBufferPointer { buffer in BN_bin2bn(buffer.baseAddress, Int32(buffer.count), nil) }
    }

    /// The bit length of a big-endian number without leading zero bytes.
    private static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.first else { return 0 }
        return (bytes.count - 1) * 8 + (8 - first.leadingZeroBitCount)
    }
}
