import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The last `DPoP-Nonce` each server of one provider gave (RFC 9449 §8, §9): the token
/// endpoint's and a resource server's (userinfo) are kept apart, by origin.
public final class DPoPNonces: Sendable {
    private let values = Mutex<[String: String]>([:])

    public init() {}

    /// The nonce to put in the next proof for `url`, if its server has given one.
    public func current(for url: String) -> String? {
        let origin = Self.origin(url)
        return values.withLock { $0[origin] }
    }

    func remember(_ nonce: String, for url: String) {
        let origin = Self.origin(url)
        values.withLock { all in
            // A provider has few servers; a bound keeps a hostile one from growing this.
            if all.count >= 16, all[origin] == nil { all.removeAll() }
            all[origin] = nonce
        }
    }

    /// scheme://host[:port] of an absolute URL.
    static func origin(_ url: String) -> String {
        let scheme = url.prefix { $0 != ":" }
        guard url.dropFirst(scheme.count).hasPrefix("://") else { return url }
        let authority = url.dropFirst(scheme.count + 3).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return (scheme + "://" + authority).lowercased()
    }
}

/// An `HTTPTransport` that adds a DPoP proof to every request to one endpoint (the token
/// endpoint), so code redemption, device polling, refresh and client credentials all carry
/// one, and to every request sent with `Authorization: DPoP <token>` (userinfo), with the
/// token's hash as `ath` (RFC 9449 §7.1). A `use_dpop_nonce` refusal (§8, §9) is answered
/// with exactly one retry that carries the server's nonce; every `DPoP-Nonce` seen is
/// remembered for the next request to that server.
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
        let bound = request.headers["Authorization"].flatMap { $0.hasPrefix("DPoP ") ? String($0.dropFirst(5)) : nil }
        guard request.url == endpoint || bound != nil else { return try await base.send(request) }
        var nonce = nonces.current(for: request.url)
        var attempt = 0
        while true {
            var signed = request
            do {
                signed.headers["DPoP"] = try signer.proof(method: request.method, url: request.url, now: now(), nonce: nonce,
                                                          accessToken: request.url == endpoint ? nil : bound)
            } catch {
                throw .configuration("the DPoP proof could not be signed: \(error.message)")
            }
            let response = try await base.send(signed)
            let fresh = response.headers["dpop-nonce"]
            if let fresh { nonces.remember(fresh, for: request.url) }
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
