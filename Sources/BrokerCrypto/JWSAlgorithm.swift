/// The JWS algorithms authbroker accepts (RFC 7518 §3, RFC 8037 §3.1). This enum is the
/// allow-list: `none`, the HMAC family and everything else have no case, so
/// `JWSAlgorithm(rawValue:)` refuses them.
public enum JWSAlgorithm: String, Sendable, CaseIterable, Equatable {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    case rs256 = "RS256"
    /// RSASSA-PSS with SHA-256, MGF1 with SHA-256 and a 32-byte salt.
    case ps256 = "PS256"
    /// ECDSA on P-256 with SHA-256; the signature is r‖s, 32 bytes each.
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384; the signature is r‖s, 48 bytes each.
    case es384 = "ES384"
    /// EdDSA; authbroker supports the Ed25519 curve only.
    case edDSA = "EdDSA"

    /// The key type a JWK must have for this algorithm (RFC 7517 §4.1 `kty`).
    public var keyType: String {
        switch self {
        case .rs256, .ps256: return "RSA"
        case .es256, .es384: return "EC"
        case .edDSA: return "OKP"
        }
    }

    /// The curve a JWK must name for this algorithm (`crv`), or nil for RSA.
    public var curveName: String? {
        switch self {
        case .rs256, .ps256: return nil
        case .es256: return ECCurve.p256.rawValue
        case .es384: return ECCurve.p384.rawValue
        case .edDSA: return "Ed25519"
        }
    }
}

/// The elliptic curves authbroker accepts for ECDSA, by their JWK `crv` names.
public enum ECCurve: String, Sendable, CaseIterable, Equatable {
    /// NIST P-256 (secp256r1, prime256v1).
    case p256 = "P-256"
    /// NIST P-384 (secp384r1).
    case p384 = "P-384"

    /// Bytes of one coordinate, and of r and of s in a JWS signature.
    public var coordinateLength: Int {
        switch self {
        case .p256: return 32
        case .p384: return 48
        }
    }
}
