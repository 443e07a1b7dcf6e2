import BrokerCrypto
import OAuth

extension Provider {
    /// The client for one account's token requests: each carries a DPoP proof signed by
    /// `signer` when there is one (the provider has `dpop` on).
    nonisolated func client(_ signer: DPoPSigner?, metadata: ProviderMetadata, clock: WallClock) -> OAuthClient {
        guard let signer else { return client }
        let transport = DPoPTransport(base: client.transport, signer: signer, endpoint: metadata.tokenEndpoint,
                                      nonces: dpopNonces, now: clock.now)
        return OAuthClient(configuration: client.configuration, transport: transport)
    }

    /// A new DPoP key for a sign-in or an account that has none yet; nil when the provider
    /// does not use DPoP. The configured algorithm must be one the provider takes.
    nonisolated func newDPoPSigner(metadata: ProviderMetadata) throws(BrokerError) -> DPoPSigner? {
        guard let algorithm = config.dpop else { return nil }
        try checkOffersDPoP(metadata)
        if let accepted = metadata.dpopSigningAlgValuesSupported, !accepted.contains(algorithm.rawValue) {
            let usable = SigningKey.algorithms.map(\.rawValue).filter(accepted.contains)
            let hint = usable.isEmpty ? "turn dpop off for it" : "set dpop = \"\(usable[0])\""
            throw BrokerError.providerError(
                provider: name, oauthError: "configuration",
                message: "\(name) does not take \(algorithm.rawValue) DPoP proofs (it takes \(accepted.map { ProviderAnswer.printable($0, limit: 16) }.joined(separator: ", "))): \(hint) in config.toml")
        }
        do {
            return try DPoPSigner(key: SigningKey.generate(algorithm))
        } catch {
            throw BrokerError.internalError("no DPoP key could be made for \(name): \(error.message)")
        }
    }

    /// Refuses `dpop` at a provider whose discovery document does not say it takes DPoP
    /// proofs: such a provider ignores the proof and issues Bearer tokens, which would be
    /// served as if bound to the daemon's key.
    nonisolated func checkOffersDPoP(_ metadata: ProviderMetadata) throws(BrokerError) {
        guard let accepted = metadata.dpopSigningAlgValuesSupported, !accepted.isEmpty else {
            throw BrokerError.configuration(provider: name, message: "dpop is set for \(name) in config.toml, but its discovery document lists no dpop_signing_alg_values_supported: it does not say it takes DPoP proofs, and would issue Bearer tokens instead of bound ones; enable DPoP for client \(config.clientID) at the provider, or set dpop = false for \(name)")
        }
    }

    /// The signer an account uses now: its own, or none when DPoP is off for the provider.
    /// A key of another algorithm than configured is kept: the provider may have bound the
    /// refresh token to it, and a new sign-in makes a key of the new algorithm.
    nonisolated func signer(of account: Account) -> DPoPSigner? {
        config.dpop == nil ? nil : account.dpop
    }
}
