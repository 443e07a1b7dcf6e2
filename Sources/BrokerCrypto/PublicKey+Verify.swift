import COpenSSL

extension PublicKey {
    /// Verifies a JWS signature (RFC 7515 §5.2 step 8) over `message`, the ASCII of
    /// `BASE64URL(header) || '.' || BASE64URL(payload)`, with `algorithm`.
    ///
    /// The key must fit the algorithm (see `fits(_:)`): the caller's choice of algorithm is
    /// never taken as a reason to use a key of another type. ECDSA signatures arrive as
    /// r‖s (RFC 7518 §3.4) of exactly twice the curve's size and are turned into the DER
    /// that OpenSSL verifies. PS256 requires a salt as long as the digest (32 bytes) and
    /// MGF1 with SHA-256 (RFC 7518 §3.5).
    ///
    /// Throws `.keyDoesNotFitAlgorithm` or `.invalidSignature`; returns only when the
    /// signature is good.
    public func verify(signature: [UInt8], message: [UInt8], algorithm: JWSAlgorithm) throws(CryptoError) {
        guard fits(algorithm) else {
            throw .keyDoesNotFitAlgorithm("a \(kind.name) key cannot verify an \(algorithm.rawValue) signature")
        }
        let encoded: [UInt8]
        switch algorithm {
        case .rs256, .ps256:
            let size = Int(EVP_PKEY_get_size(pkey))
            guard signature.count == size else {
                throw .invalidSignature("an \(algorithm.rawValue) signature for this key has \(size) bytes; this one has \(signature.count)")
            }
            encoded = signature
        case .es256, .es384:
            guard case .ec(let curve) = kind else {
                throw .keyDoesNotFitAlgorithm("a \(kind.name) key cannot verify an \(algorithm.rawValue) signature")
            }
            encoded = try Self.derSignature(raw: signature, curve: curve, algorithm: algorithm)
        case .edDSA:
            guard signature.count == 64 else {
                throw .invalidSignature("an Ed25519 signature has 64 bytes; this one has \(signature.count)")
            }
            encoded = signature
        }
        defer { ERR_clear_error() }
        guard let context = EVP_MD_CTX_new() else { throw .invalidSignature("OpenSSL could not start a verification") }
        defer { EVP_MD_CTX_free(context) }
        let digest: OpaquePointer?
        switch algorithm {
        case .rs256, .ps256, .es256: digest = EVP_sha256()
        case .es384: digest = EVP_sha384()
        case .edDSA: digest = nil // Ed25519 hashes internally (RFC 8032 §5.1).
        }
        var keyContext: OpaquePointer?
        guard EVP_DigestVerifyInit(context, &keyContext, digest, nil, pkey) == 1 else {
            throw .invalidSignature("OpenSSL could not start an \(algorithm.rawValue) verification")
        }
        if algorithm == .ps256 {
            guard let keyContext,
                  EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                  EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1,
                  EVP_PKEY_CTX_set_rsa_mgf1_md(keyContext, EVP_sha256()) == 1
            else { throw .invalidSignature("OpenSSL could not set up RSA-PSS") }
        }
        let result = encoded.withUnsafeBufferPointer { signatureBytes in
            message.withUnsafeBufferPointer { messageBytes in
                EVP_DigestVerify(context, signatureBytes.baseAddress, signatureBytes.count,
                                 messageBytes.baseAddress, messageBytes.count)
            }
        }
        guard result == 1 else { throw .invalidSignature("the \(algorithm.rawValue) signature does not match the key") }
    }

    /// The DER `ECDSA-Sig-Value` (RFC 3279 §2.2.3) for a JWS r‖s signature.
    private static func derSignature(raw: [UInt8], curve: ECCurve, algorithm: JWSAlgorithm) throws(CryptoError) -> [UInt8] {
        let half = curve.coordinateLength
        guard raw.count == 2 * half else {
            throw .invalidSignature("an \(algorithm.rawValue) signature has \(2 * half) bytes (r and s); this one has \(raw.count)")
        }
        let made = raw.withUnsafeBufferPointer { bytes -> [UInt8]? in
            guard let base = bytes.baseAddress, let signature = ECDSA_SIG_new() else { return nil }
            defer { ECDSA_SIG_free(signature) }
            guard let r = BN_bin2bn(base, Int32(half), nil) else { return nil }
            guard let s = BN_bin2bn(base + half, Int32(half), nil) else { BN_free(r); return nil }
            // On success ECDSA_SIG_set0 owns r and s, and ECDSA_SIG_free frees them.
            guard ECDSA_SIG_set0(signature, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
            var der: UnsafeMutablePointer<UInt8>?
            let length = i2d_ECDSA_SIG(signature, &der)
            defer { ab_openssl_free(der) }
            guard length > 0, let der else { return nil }
            return Array(UnsafeBufferPointer(start: der, count: Int(length)))
        }
        guard let made else {
            ERR_clear_error()
            throw .invalidSignature("OpenSSL could not read the \(algorithm.rawValue) signature")
        }
        return made
    }
}

extension PublicKey.Kind {
    /// "RSA", "P-256", "P-384" or "Ed25519", for sentences.
    public var name: String {
        switch self {
        case .rsa: return "RSA"
        case .ec(let curve): return curve.rawValue
        case .ed25519: return "Ed25519"
        }
    }
}
