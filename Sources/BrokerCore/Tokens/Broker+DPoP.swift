import BrokerCrypto
import BrokerProtocol
import OAuth

extension Broker {
    /// The account with a DPoP key when its provider uses DPoP: an account signed in
    /// before DPoP was turned on gets one here, stored before its first use, because the
    /// provider may bind the next refresh token to it. Runs in the account's RefreshQueue.
    func withDPoPKey(_ account: Account, provider: Provider, metadata: ProviderMetadata) async throws(BrokerError) -> Account {
        guard provider.config.dpop != nil, account.dpop == nil else { return account }
        var updated = account
        updated.dpop = try provider.newDPoPSigner(metadata: metadata)
        accounts.update(account.key) { $0.dpop = updated.dpop }
        guard !account.machine else { return updated }  // machine accounts store nothing
        do {
            try await store.save(AccountSecret.credential(for: updated))
        } catch {
            updated.unsaved = true
            accounts.update(account.key) { $0.unsaved = true }
            logger.error("the new DPoP key could not be written to the store; retrying in the background", metadata: ["account": "\(account.key)", "error": "\(error.message)"])
            retrySave(account.key)
        }
        logger.info("made a DPoP key", metadata: ["account": "\(account.key)", "alg": "\(updated.dpop?.key.algorithm.rawValue ?? "-")"])
        return updated
    }

    /// `dpop.proof`: the token `token.get` would give, and a proof for one request with it
    /// (`ath` is the token's hash), signed with the account's key inside the daemon.
    public func dpopProof(_ request: DPoPProofParams) async throws(BrokerError) -> DPoPProofResult {
        try Self.checkProofTarget(request)
        let provider = try provider(request.token.provider)
        guard provider.config.dpop != nil else {
            throw BrokerError.invalidRequest(message: "\(provider.name) does not use DPoP: set dpop = true for it in config.toml, or send its tokens as Bearer")
        }
        let token = try await token(request.token)
        // Read again after the token: a refresh may just have given the account its key.
        let (_, account) = try resolved(provider: request.token.provider, account: request.token.account)
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
              let token = cachedToken(request.token), token.tokenType == "DPoP",
              case .found(let provider, let account) = resolve(provider: request.token.provider, account: request.token.account),
              provider.config.dpop != nil, let signer = account.dpop,
              let proof = try? signer.proof(method: request.htm, url: request.htu, now: clock.now(), nonce: request.nonce,
                                            accessToken: token.accessToken)
        else { return nil }
        return DPoPProofResult(proof: proof, token: token)
    }

    /// htm is an HTTP method token, htu an absolute http(s) URL, nonce printable: all of
    /// bounded size, since they end up in a header the caller sends.
    static func checkProofTarget(_ request: DPoPProofParams) throws(BrokerError) {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        guard !request.htm.isEmpty, request.htm.utf8.count <= 32, request.htm.utf8.allSatisfy(tchar.contains) else {
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

    /// Extra token parameters: none of the protocol's own names, and a sensible size.
    static func checkParams(_ params: [String: String]?) throws(BrokerError) {
        guard let params, !params.isEmpty else { return }
        let reserved = TokenRequestParameters.reserved(in: params.keys)
        guard reserved.isEmpty else {
            throw BrokerError.invalidRequest(message: "params may not set \(reserved.joined(separator: ", ")): authbroker sets it itself")
        }
        guard params.count <= 16, params.allSatisfy({ !$0.key.isEmpty && $0.key.utf8.count <= 128 && $0.value.utf8.count <= 4096 }) else {
            throw BrokerError.invalidRequest(message: "params may hold up to 16 names of up to 128 bytes, each with a value of up to 4096 bytes")
        }
    }
}
