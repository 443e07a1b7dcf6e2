extension JWK {
    /// The JWK SHA-256 thumbprint (RFC 7638 §3): base64url of the SHA-256 of the key's
    /// required members, in lexicographic order, as JSON without whitespace. DPoP binds
    /// tokens to it (`cnf.jkt`, RFC 9449 §6.1). Nil for a key missing a required member.
    public func thumbprint() -> String? {
        let members: [(String, String?)]
        switch kty {
        case "EC": members = [("crv", crv), ("kty", kty), ("x", x), ("y", y)]
        case "OKP": members = [("crv", crv), ("kty", kty), ("x", x)]
        case "RSA": members = [("e", e), ("kty", kty), ("n", n)]
        default: return nil
        }
        var json = "{"
        for (index, (name, value)) in members.enumerated() {
            // Values are base64url or fixed names: nothing to escape, but never trust that.
            guard let value, value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) else { return nil }
            json += (index == 0 ? "" : ",") + "\"\(name)\":\"\(value)\""
        }
        json += "}"
        return Base64URL.encode(SHA256.hash(Array(json.utf8)))
    }
}
