/// Why a key could not be read or a signature was not accepted. The sentences name no key
/// material and no signature bytes.
public enum CryptoError: Error, Sendable, Equatable {
    /// The JWK or its members do not make a usable public key (bad base64url, wrong
    /// length, a number out of range, a point not on the curve, an unsupported type).
    case invalidKey(String)
    /// The key is of another type or curve than the algorithm needs.
    case keyDoesNotFitAlgorithm(String)
    /// The signature does not verify, or has the wrong shape for the algorithm.
    case invalidSignature(String)

    /// A sentence fit for a user.
    public var message: String {
        switch self {
        case .invalidKey(let m), .keyDoesNotFitAlgorithm(let m), .invalidSignature(let m): return m
        }
    }
}
