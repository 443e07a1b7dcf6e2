import BrokerCrypto
import BrokerProtocol
import HTTPClient
import OAuth

/// The proofs service: `dpop.proof` (RFC 9449), the token `token.get` would give and a
/// proof for one request with it, signed with the account's key inside the daemon
/// (docs/dpop.md). The keys themselves are the accounts' (made by a sign-in or, for an
/// account from before DPoP was turned on, by the refresher, and kept in the store).
///
/// Owns no state. Depends on the tokens service (the token), the accounts (the key) and
/// the providers (whether DPoP is on), reached only through `TokensForProofs`, which the
/// composition root builds.
public final class ProofsService: RegistersMethods, Sendable {
    private let tokens: TokensForProofs
    private let clock: WallClock

    init(tokens: TokensForProofs, clock: WallClock) {
        self.tokens = tokens
        self.clock = clock
    }

    /// `dpop.proof`: the token `token.get` would give, and a proof for one request with it
    /// (`ath` is the token's hash), signed with the account's key inside the daemon.
    public func dpopProof(_ request: DPoPProofParams) async throws(BrokerError) -> DPoPProofResult {
        try Self.checkProofTarget(request)
        // A provider known now is checked before a token is minted; a resource found by
        // discovery finds its provider with the token.
        if let known = tokens.knownProvider(request.token.provider, resource: request.token.resource) {
            try Self.checkUsesDPoP(known)
        }
        let token = try await tokens.token(request.token)
        let provider = try tokens.provider(request.token.provider, resource: request.token.resource)
        try Self.checkUsesDPoP(provider)
        // Read after the token: a refresh may just have given the account its key.
        let (_, account) = try tokens.resolved(provider: provider.name, account: request.token.account)
        guard let signer = account.dpop else {
            throw BrokerError.internalError("the account has no DPoP key although its provider uses DPoP")
        }
        guard token.tokenType == "DPoP" else {
            throw BrokerError.providerError(provider: provider.name, oauthError: "configuration", message: "\(provider.name) issued a \(token.tokenType) token, not a DPoP-bound one: enable DPoP for client \(provider.config.clientID) at the provider")
        }
        do {
            let proof = try signer.proof(method: request.htm, url: request.htu, now: clock.now(), nonce: request.nonce,
                                         accessToken: token.accessToken)
            return DPoPProofResult(proof: proof, token: token)
        } catch {
            throw BrokerError.internalError("the DPoP proof could not be signed: \(error.message)")
        }
    }

    /// The `dpop.proof` answer without waiting, when the token is cached: the proof is
    /// signed on the caller's thread (tens of microseconds). Nil sends the request on to
    /// `dpopProof(_:)`, which also explains any refusal.
    public func cachedDPoPProof(_ request: DPoPProofParams) -> DPoPProofResult? {
        guard (try? Self.checkProofTarget(request)) != nil,
              let token = tokens.cachedToken(request.token), token.tokenType == "DPoP",
              case .found(let provider, let account) = tokens.resolve(provider: request.token.provider, account: request.token.account,
                                                          resource: request.token.resource),
              provider.config.dpop != nil, let signer = account.dpop,
              let proof = try? signer.proof(method: request.htm, url: request.htu, now: clock.now(), nonce: request.nonce,
                                            accessToken: token.accessToken)
        else { return nil }
        return DPoPProofResult(proof: proof, token: token)
    }

    /// htm is an HTTP method token, htu an absolute http(s) URL, nonce printable: all of
    /// bounded size, since they end up in a header the caller sends.
    static func checkUsesDPoP(_ provider: Provider) throws(BrokerError) {
        guard provider.config.dpop != nil else {
            throw BrokerError.invalidRequest(message: "\(provider.name) does not use DPoP: set dpop = true for it in config.toml, or send its tokens as Bearer")
        }
    }

    static func checkProofTarget(_ request: DPoPProofParams) throws(BrokerError) {
        guard !request.htm.isEmpty, request.htm.utf8.count <= 32, request.htm.utf8.allSatisfy(HTTPToken.isByte) else {
            throw BrokerError.invalidRequest(message: "htm must be an HTTP method such as GET or POST")
        }
        let url = request.htu
        guard url.utf8.count <= 4096, url.hasPrefix("https://") || url.hasPrefix("http://"),
              url.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw BrokerError.invalidRequest(message: "htu must be the request's absolute http(s) URL, without spaces")
        }
        if let nonce = request.nonce, nonce.isEmpty || nonce.utf8.count > 1024 || !nonce.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) {
            throw BrokerError.invalidRequest(message: "nonce must be the DPoP-Nonce the server sent, as printable text")
        }
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .dpopProof, empty: DPoPProofParams(token: TokenGetParams(), htm: "", htu: ""),
            access: .checked("the token the proof is for, as token.get") { p in
                .token(provider: p.token.provider, targets: [p.token.resource], scopes: p.token.scopes ?? [],
                       params: p.token.params.map { Array($0.keys) } ?? [])
            },
            cancelledOnClose: { $0.token.waitForSignIn != nil },
            mints: true,
            audit: { p, r in
                AuditSubject(method: .dpopProof, provider: r?.token.provider ?? p.token.provider, account: r?.token.account ?? p.token.account,
                             resource: p.token.resource)
            },
            answer: .nowOrLater(fast: { self.cachedDPoPProof($0) },
                                slow: { p throws(BrokerError) in try await self.dpopProof(p) })))
    }
}
