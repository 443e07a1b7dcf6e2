import COpenSSL

/// A private key that signs JWS (RFC 7515), held as an OpenSSL `EVP_PKEY`: the daemon's
/// DPoP key (RFC 9449). ES256 (P-256), EdDSA (Ed25519) and RS256 (RSA 2048) are made.
///
/// The private half never leaves this object except as PKCS#8 DER for the Secret Service
/// (`pkcs8()`); `description` names the algorithm only, so the key cannot end up in a log
/// line by interpolation. OpenSSL allows concurrent signing with one `EVP_PKEY`.
public final class SigningKey: @unchecked Sendable, CustomStringConvertible {
    /// The algorithms keys are made for.
    public static let algorithms: [JWSAlgorithm] = [.es256, .edDSA, .rs256]

    /// The one algorithm this key signs with.
    public let algorithm: JWSAlgorithm
    /// The owned `EVP_PKEY *`.
    let pkey: OpaquePointer

    private init(pkey: OpaquePointer, algorithm: JWSAlgorithm) {
        self.pkey = pkey
        self.algorithm = algorithm
    }

    deinit { EVP_PKEY_free(pkey) }

    public var description: String { "\(algorithm.rawValue) signing key" }

    /// A new random key for `algorithm` (ES256, EdDSA or RS256).
    public static func generate(_ algorithm: JWSAlgorithm) throws(CryptoError) -> SigningKey {
        defer { ERR_clear_error() }
        let type: UnsafePointer<CChar>
        switch algorithm {
        case .es256: type = AB_KEYTYPE_EC
        case .edDSA: type = AB_KEYTYPE_ED25519
        case .rs256: type = AB_KEYTYPE_RSA
        case .ps256, .es384: throw .invalidKey("authbroker makes signing keys for ES256, EdDSA and RS256 only, not \(algorithm.rawValue)")
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw .invalidKey("OpenSSL cannot make an \(algorithm.rawValue) key: check the system's OpenSSL installation")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw .invalidKey("OpenSSL could not start making an \(algorithm.rawValue) key") }
        switch algorithm {
        case .es256: guard EVP_PKEY_CTX_set_group_name(context, AB_SN_X9_62_PRIME256V1) == 1 else { throw .invalidKey("OpenSSL has no P-256 curve") }
        case .rs256: guard EVP_PKEY_CTX_set_rsa_keygen_bits(context, 2048) == 1 else { throw .invalidKey("OpenSSL cannot make 2048-bit RSA keys") }
        default: break
        }
        var made: OpaquePointer?
        guard EVP_PKEY_generate(context, &made) == 1, let pkey = made else {
            EVP_PKEY_free(made)
            throw .invalidKey("OpenSSL could not make an \(algorithm.rawValue) key")
        }
        return SigningKey(pkey: pkey, algorithm: algorithm)
    }

    /// The key stored by `pkcs8()`; it must be a key of `algorithm`'s type (and curve).
    public init(pkcs8 der: [UInt8], algorithm: JWSAlgorithm) throws(CryptoError) {
        defer { ERR_clear_error() }
        let read: OpaquePointer? = der.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let info = d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, bytes.count) else { return nil }
            defer { PKCS8_PRIV_KEY_INFO_free(info) }
            return EVP_PKCS82PKEY(info)
        }
        guard let pkey = read else { throw .invalidKey("the stored \(algorithm.rawValue) key is not a PKCS#8 private key") }
        self.pkey = pkey
        self.algorithm = algorithm
        guard let kind = Self.kind(of: pkey), Self.fits(kind, algorithm) else {
            throw .keyDoesNotFitAlgorithm("the stored key does not fit \(algorithm.rawValue)")
        }
    }

    /// What kind of key OpenSSL read, or nil for one authbroker does not make.
    private static func kind(of pkey: OpaquePointer) -> PublicKey.Kind? {
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA: return .rsa(modulusBits: Int(EVP_PKEY_get_bits(pkey)))
        case EVP_PKEY_ED25519: return .ed25519
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(pkey, &name, name.count, &length) == 1 else { return nil }
            let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return group == String(cString: AB_SN_X9_62_PRIME256V1) ? .ec(.p256) : nil
        default: return nil
        }
    }

    private static func fits(_ kind: PublicKey.Kind, _ algorithm: JWSAlgorithm) -> Bool {
        switch (algorithm, kind) {
        case (.es256, .ec(.p256)), (.edDSA, .ed25519): return true
        case (.rs256, .rsa(let bits)): return bits >= PublicKey.minimumRSABits
        default: return false
        }
    }

    /// The private key as PKCS#8 DER (RFC 5208), for the Secret Service only: never log,
    /// show or send it.
    public func pkcs8() throws(CryptoError) -> [UInt8] {
        defer { ERR_clear_error() }
        guard let info = EVP_PKEY2PKCS8(pkey) else { throw .invalidKey("OpenSSL could not write the \(algorithm.rawValue) key") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        var der: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS8_PRIV_KEY_INFO(info, &der)
        guard length > 0, let der else { throw .invalidKey("OpenSSL could not write the \(algorithm.rawValue) key") }
        defer {
            OPENSSL_cleanse(der, Int(length))
            ab_openssl_free(der)
        }
        return Array(UnsafeBufferPointer(start: der, count: Int(length)))
    }

    /// The public half as a JWK with only the members RFC 7638 hashes (no `d`, no `kid`).
    public func publicJWK() throws(CryptoError) -> JWK {
        defer { ERR_clear_error() }
        switch algorithm {
        case .es256:
            let point = try octets(AB_OSSL_PKEY_PARAM_PUB_KEY, what: "P-256 point")
            guard point.count == 65, point[0] == 0x04 else { throw .invalidKey("OpenSSL gave an unexpected P-256 point encoding") }
            return JWK(kty: "EC", crv: "P-256", x: Base64URL.encode(Array(point[1...32])), y: Base64URL.encode(Array(point[33...])))
        case .edDSA:
            return JWK(kty: "OKP", crv: "Ed25519", x: Base64URL.encode(try octets(AB_OSSL_PKEY_PARAM_PUB_KEY, what: "Ed25519 key")))
        default:
            return JWK(kty: "RSA", n: Base64URL.encode(try number(AB_OSSL_PKEY_PARAM_RSA_N)),
                       e: Base64URL.encode(try number(AB_OSSL_PKEY_PARAM_RSA_E)))
        }
    }

    /// Signs `message` (the JWS signing input) and returns the signature as JWS carries it:
    /// r‖s of 32 bytes each for ES256 (RFC 7518 §3.4), not OpenSSL's DER.
    public func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        defer { ERR_clear_error() }
        guard let context = EVP_MD_CTX_new() else { throw .invalidSignature("OpenSSL could not start signing") }
        defer { EVP_MD_CTX_free(context) }
        // Ed25519 hashes internally (RFC 8032 §5.1): no digest.
        let digest = algorithm == .edDSA ? nil : EVP_sha256()
        guard EVP_DigestSignInit(context, nil, digest, nil, pkey) == 1 else {
            throw .invalidSignature("OpenSSL could not start an \(algorithm.rawValue) signature")
        }
        var length = 0
        let signature = message.withUnsafeBufferPointer { input -> [UInt8]? in
            guard EVP_DigestSign(context, nil, &length, input.baseAddress, input.count) == 1 else { return nil }
            var output = [UInt8](repeating: 0, count: length)
            let ok = output.withUnsafeMutableBufferPointer { EVP_DigestSign(context, $0.baseAddress, &length, input.baseAddress, input.count) }
            return ok == 1 ? Array(output.prefix(length)) : nil
        }
        guard let signature else { throw .invalidSignature("OpenSSL could not make an \(algorithm.rawValue) signature") }
        return algorithm == .es256 ? try Self.rawSignature(der: signature, half: 32) : signature
    }

    /// r‖s, each left-padded to `half` bytes, from a DER `ECDSA-Sig-Value`.
    private static func rawSignature(der: [UInt8], half: Int) throws(CryptoError) -> [UInt8] {
        let raw = der.withUnsafeBufferPointer { bytes -> [UInt8]? in
            var cursor = bytes.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, bytes.count) else { return nil }
            defer { ECDSA_SIG_free(signature) }
            guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature) else { return nil }
            var out = [UInt8](repeating: 0, count: 2 * half)
            let written = out.withUnsafeMutableBufferPointer { buffer -> Bool in
                guard let base = buffer.baseAddress else { return false }
                return BN_bn2binpad(r, base, Int32(half)) == Int32(half) && BN_bn2binpad(s, base + half, Int32(half)) == Int32(half)
            }
            return written ? out : nil
        }
        guard let raw else { throw .invalidSignature("OpenSSL made an ECDSA signature authbroker cannot read") }
        return raw
    }

    private func octets(_ name: UnsafePointer<CChar>, what: String) throws(CryptoError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 133)
        var length = 0
        let ok = buffer.withUnsafeMutableBufferPointer { EVP_PKEY_get_octet_string_param(pkey, name, $0.baseAddress, $0.count, &length) }
        guard ok == 1 else { throw .invalidKey("OpenSSL could not give the \(what)") }
        return Array(buffer.prefix(length))
    }

    private func number(_ name: UnsafePointer<CChar>) throws(CryptoError) -> [UInt8] {
        var bignum: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bignum) == 1, let bignum else { throw .invalidKey("OpenSSL could not give the RSA key's numbers") }
        defer { BN_free(bignum) }
        var out = [UInt8](repeating: 0, count: Int((BN_num_bits(bignum) + 7) / 8))
        _ = out.withUnsafeMutableBufferPointer { BN_bn2bin(bignum, $0.baseAddress) }
        return out
    }
}
