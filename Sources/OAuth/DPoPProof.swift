import BrokerCrypto
import BrokerProtocol

/// Makes DPoP proofs (RFC 9449 §4): compact JWS with the header
/// `{"typ":"dpop+jwt","alg":…,"jwk":…}` and the claims `jti`, `htm`, `htu`, `iat`, and
/// `nonce` and `ath` when given. The private key stays inside; only proofs come out.
public struct DPoPSigner: Sendable {
    /// The key proofs are signed with.
    public let key: SigningKey
    /// The public key's JWK thumbprint (RFC 7638), which bound tokens carry as `cnf.jkt`.
    public let thumbprint: String
    /// The base64url header, the same for every proof of this key.
    private let header: String

    /// A signer for `key`.
    public init(key: SigningKey) throws(CryptoError) {
        self.key = key
        let jwk = try key.publicJWK()
        guard let thumbprint = jwk.thumbprint() else { throw .invalidKey("the DPoP key has no thumbprint") }
        self.thumbprint = thumbprint
        var members: [(String, String)] = [("kty", jwk.kty)]
        if let crv = jwk.crv { members.append(("crv", crv)) }
        for (name, value) in [("x", jwk.x), ("y", jwk.y), ("n", jwk.n), ("e", jwk.e)] {
            if let value { members.append((name, value)) }
        }
        let jwkJSON = "{" + members.map { "\(JSONString.quoted($0.0)):\(JSONString.quoted($0.1))" }.joined(separator: ",") + "}"
        let headerJSON = #"{"typ":"dpop+jwt","alg":"# + JSONString.quoted(key.algorithm.rawValue) + #","jwk":"# + jwkJSON + "}"
        self.header = Base64URL.encode(Array(headerJSON.utf8))
    }

    /// A proof for one request: `method` (upper-cased), `url` without its query and
    /// fragment (§4.2), `now` as `iat`, a fresh random `jti`; `nonce` as the server gave it;
    /// `accessToken` only for requests to resource servers (its SHA-256 as `ath`, §4.2).
    public func proof(method: String, url: String, now: Double, nonce: String? = nil,
                      accessToken: String? = nil) throws(CryptoError) -> String {
        var claims = "{" + #""jti":"# + JSONString.quoted(SecureRandom.token(bytes: 16))
        claims += #","htm":"# + JSONString.quoted(method.uppercased())
        claims += #","htu":"# + JSONString.quoted(Self.target(url))
        claims += #","iat":"# + String(Int64(now.rounded(.down)))
        if let nonce { claims += #","nonce":"# + JSONString.quoted(nonce) }
        if let accessToken { claims += #","ath":"# + JSONString.quoted(Base64URL.encode(SHA256.hash(Array(accessToken.utf8)))) }
        claims += "}"
        let input = header + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))
    }

    /// `url` without its query and fragment (RFC 9449 §4.2 `htu`).
    public static func target(_ url: String) -> String {
        guard let cut = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return url }
        return String(url[..<cut])
    }
}
