/// The public members of a JSON Web Key (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2) that
/// authbroker reads. Private members (`d`, `p`, …) are not kept, even when a provider
/// publishes them by mistake.
public struct JWK: Codable, Sendable, Equatable {
    /// Key type: "RSA", "EC" or "OKP".
    public var kty: String
    /// Key ID, matched against a JWS header's `kid`.
    public var kid: String?
    /// Intended use: "sig" or "enc".
    public var use: String?
    /// The one algorithm this key is meant for, if the provider says.
    public var alg: String?
    /// Permitted operations, e.g. ["verify"].
    public var keyOps: [String]?
    /// Curve: "P-256", "P-384", "Ed25519", …
    public var crv: String?
    /// RSA modulus, base64url.
    public var n: String?
    /// RSA exponent, base64url.
    public var e: String?
    /// EC x coordinate or OKP public key, base64url.
    public var x: String?
    /// EC y coordinate, base64url.
    public var y: String?

    enum CodingKeys: String, CodingKey {
        case kty, kid, use, alg, crv, n, e, x, y
        case keyOps = "key_ops"
    }

    /// Makes a JWK from its members.
    public init(kty: String, kid: String? = nil, use: String? = nil, alg: String? = nil, keyOps: [String]? = nil,
                crv: String? = nil, n: String? = nil, e: String? = nil, x: String? = nil, y: String? = nil) {
        self.kty = kty
        self.kid = kid
        self.use = use
        self.alg = alg
        self.keyOps = keyOps
        self.crv = crv
        self.n = n
        self.e = e
        self.x = x
        self.y = y
    }

    /// Whether this key may verify a JWS signed with `algorithm`: the key type (and the
    /// curve) must be the algorithm's; an `alg` member must name exactly this algorithm;
    /// a `use` member must be "sig"; `key_ops`, if given, must include "verify".
    /// A JWS header's algorithm alone never decides which kind of key is used.
    public func isUsable(for algorithm: JWSAlgorithm) -> Bool {
        guard kty == algorithm.keyType else { return false }
        if let curve = algorithm.curveName, crv != curve { return false }
        if let alg, alg != algorithm.rawValue { return false }
        if let use, use != "sig" { return false }
        if let keyOps, !keyOps.contains("verify") { return false }
        return true
    }

    /// The public key these members describe.
    public func publicKey() throws(CryptoError) -> PublicKey {
        switch kty {
        case "RSA":
            return try PublicKey.rsa(modulus: try member(n, "n"), exponent: try member(e, "e"))
        case "EC":
            guard let crv else { throw .invalidKey("the EC key has no crv member") }
            guard let curve = ECCurve(rawValue: crv) else {
                throw .invalidKey("the EC curve \(Self.printable(crv)) is not supported; authbroker accepts P-256 and P-384")
            }
            return try PublicKey.ec(curve: curve, x: try member(x, "x"), y: try member(y, "y"))
        case "OKP":
            guard crv == "Ed25519" else {
                throw .invalidKey("the OKP curve \(Self.printable(crv ?? "(none)")) is not supported; authbroker accepts Ed25519")
            }
            return try PublicKey.ed25519(try member(x, "x"))
        default:
            throw .invalidKey("the key type \(Self.printable(kty)) is not supported; authbroker accepts RSA, EC and OKP")
        }
    }

    private func member(_ value: String?, _ name: String) throws(CryptoError) -> [UInt8] {
        guard let value else { throw .invalidKey("the \(kty) key has no \(name) member") }
        guard let bytes = Base64URL.decode(value) else { throw .invalidKey("the key's \(name) member is not base64url") }
        return bytes
    }

    /// Printable ASCII only, at most 40 characters: JWKS text is the provider's, not ours.
    static func printable(_ text: String) -> String {
        let kept = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(40)
        return String(String.UnicodeScalarView(kept))
    }
}
