#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The last `DPoP-Nonce` one provider gave (RFC 9449 §8), shared by its accounts.
public final class DPoPNonces: Sendable {
    private let value = Mutex<String?>(nil)

    public init() {}

    /// The nonce to put in the next proof, if the provider has given one.
    public var current: String? { value.withLock { $0 } }

    func remember(_ nonce: String) { value.withLock { $0 = nonce } }
}

/// An `HTTPTransport` that adds a DPoP proof to every request to one endpoint (the token
/// endpoint), so code redemption, device polling, refresh and client credentials all carry
/// one. A `use_dpop_nonce` refusal (RFC 9449 §8) is answered with exactly one retry that
/// carries the provider's nonce; every `DPoP-Nonce` seen is remembered for the next request.
public struct DPoPTransport: HTTPTransport {
    let base: any HTTPTransport
    let signer: DPoPSigner
    let endpoint: String
    let nonces: DPoPNonces
    let now: @Sendable () -> Double

    /// Wraps `base`; requests to `endpoint` get proofs by `signer` with `now()` as `iat`.
    public init(base: any HTTPTransport, signer: DPoPSigner, endpoint: String, nonces: DPoPNonces,
                now: @escaping @Sendable () -> Double) {
        self.base = base
        self.signer = signer
        self.endpoint = endpoint
        self.nonces = nonces
        self.now = now
    }

    public func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.url == endpoint else { return try await base.send(request) }
        var nonce = nonces.current
        var attempt = 0
        while true {
            var signed = request
            do {
                signed.headers["DPoP"] = try signer.proof(method: request.method, url: request.url, now: now(), nonce: nonce)
            } catch {
                throw .configuration("the DPoP proof could not be signed: \(error.message)")
            }
            let response = try await base.send(signed)
            let fresh = response.headers["dpop-nonce"]
            if let fresh { nonces.remember(fresh) }
            attempt += 1
            guard attempt == 1, let fresh, fresh != nonce, Self.asksForNonce(response) else { return response }
            nonce = fresh
        }
    }

    /// A 400 (token endpoint) or 401 (resource) whose error is `use_dpop_nonce`.
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        guard response.status == 400 || response.status == 401 else { return false }
        if response.headers["www-authenticate"]?.contains("use_dpop_nonce") == true { return true }
        let json = try? JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        return json?["error"]?.stringValue == "use_dpop_nonce"
    }
}
