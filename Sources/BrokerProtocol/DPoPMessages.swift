/// `dpop.proof` params: the token's (as for `token.get`) and the request the proof is for.
public struct DPoPProofParams: Codable, Sendable, Equatable {
    /// Which token: provider, account, resource, scopes, params, min_ttl.
    public var token: TokenGetParams
    /// The HTTP method of the request the proof goes with, e.g. "GET".
    public var htm: String
    /// The request's URL; its query and fragment are left out of the proof.
    public var htu: String
    /// The `DPoP-Nonce` the resource server asked for, if any.
    public var nonce: String?

    public init(token: TokenGetParams, htm: String, htu: String, nonce: String? = nil) {
        self.token = token
        self.htm = htm
        self.htu = htu
        self.nonce = nonce
    }

    enum CodingKeys: String, CodingKey {
        case htm, htu, nonce
    }

    /// The token's members sit beside htm, htu and nonce in one flat object.
    public init(from decoder: any Decoder) throws {
        token = try TokenGetParams(from: decoder)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        htm = try c.decode(String.self, forKey: .htm)
        htu = try c.decode(String.self, forKey: .htu)
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
    }

    public func encode(to encoder: any Encoder) throws {
        try token.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(htm, forKey: .htm)
        try c.encode(htu, forKey: .htu)
        try c.encodeIfPresent(nonce, forKey: .nonce)
    }
}

/// `dpop.proof` result: the proof and the token whose hash (`ath`) it carries, so the two
/// headers a caller sends always belong together.
public struct DPoPProofResult: Codable, Sendable, Equatable {
    /// The value of the request's `DPoP` header.
    public var proof: String
    /// The token, as `token.get` gives it; `token_type` is "DPoP".
    public var token: TokenGetResult

    public init(proof: String, token: TokenGetResult) {
        self.proof = proof
        self.token = token
    }

    enum CodingKeys: String, CodingKey {
        case proof
    }

    public init(from decoder: any Decoder) throws {
        token = try TokenGetResult(from: decoder)
        proof = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .proof)
    }

    public func encode(to encoder: any Encoder) throws {
        try token.encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(proof, forKey: .proof)
    }
}
