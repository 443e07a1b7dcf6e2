import BrokerCrypto

/// A Proof Key for Code Exchange pair (RFC 7636) with the S256 method.
public struct PKCE: Sendable, Equatable {
    /// `code_challenge_method`.
    public static let method = "S256"
    /// `code_verifier`, sent to the token endpoint with the code. Secret until then.
    public let verifier: String
    /// `code_challenge`: BASE64URL(SHA256(ASCII(verifier))), sent with the authorization request.
    public let challenge: String

    /// A new pair with a 43-character verifier from 32 random bytes (RFC 7636 §4.1).
    public init() {
        self.init(verifier: SecureRandom.token(bytes: 32))
    }

    /// The pair for a given verifier.
    public init(verifier: String) {
        self.verifier = verifier
        self.challenge = Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
    }
}
