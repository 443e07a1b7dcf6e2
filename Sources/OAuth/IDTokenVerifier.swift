import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Verifies ID tokens (OpenID Connect Core §3.1.3.7, RFC 7515, RFC 7519) with the
/// provider's published keys.
///
/// The checks run in this order, each with its own `IDTokenError.Reason`:
/// 1. compact JWS shape: three base64url segments, a JSON object header, no `crit`;
/// 2. the header's `alg` is on the allow-list (RS256, PS256, ES256, ES384, EdDSA):
///    `none`, HMAC and everything else are refused;
/// 3. the key: the one named by `kid` (fetching the JWKS again once for an unknown kid,
///    rate-limited by `JWKSCache`), or with no `kid` the only key that fits (fetched again
///    the same way when the signature does not verify with it: a rotated key). The key must
///    fit the algorithm — kty RSA for RS/PS, EC with the matching curve for ES256/ES384,
///    OKP Ed25519 for EdDSA, its own `alg` if it has one equal to the header's, `use` "sig"
///    if given — so the header's word alone never picks how a key is used;
/// 4. the signature;
/// 5. `iss` is exactly the provider's issuer;
/// 6. `aud` contains the client; with several audiences `azp` is present; an `azp` is the client;
/// 7. `exp` is in the future, allowing `skew`;
/// 8. `iat` is present and not in the future beyond `skew`;
/// 9. `nonce` equals the expected one when one is expected.
///
/// Header members that point at keys elsewhere (`jku`, `x5u`, `jwk`, `x5c`) are ignored:
/// keys come only from the provider's `jwks_uri`.
public struct IDTokenVerifier: Sendable {
    /// Where the keys come from; share one cache per daemon.
    public let keys: JWKSCache
    /// The longest ID token read; anything longer is refused before any parsing.
    public static let maximumLength = 64 * 1024

    /// Makes a verifier that takes keys from `keys`.
    public init(keys: JWKSCache) {
        self.keys = keys
    }

    /// Verifies `idToken` for `clientID` at the provider described by `metadata` and
    /// returns its claims. `nonce` is the nonce sent in the authentication request, or
    /// nil when none was (device flow, refresh). `now` and `skew` set the time window for
    /// `exp` and `iat`.
    public func verify(_ idToken: String, metadata: ProviderMetadata, clientID: String, nonce: String?,
                       now: Date = Date(), skew: TimeInterval = 60) async throws(IDTokenError) -> IDTokenClaims {
        let provider = EndpointPolicy.describe(metadata.issuer)
        // 1. Shape.
        let jws = try CompactJWS(idToken)
        // 2. Algorithm.
        guard let algorithmName = jws.header["alg"]?.stringValue else {
            throw IDTokenError(.algorithmNotAllowed, "the ID token from \(provider) names no signature algorithm; sign in again")
        }
        guard let algorithm = JWSAlgorithm(rawValue: algorithmName) else {
            let shown = ProviderAnswer.printable(algorithmName, limit: 20)
            throw IDTokenError(.algorithmNotAllowed,
                               "the ID token from \(provider) is signed with \(shown.isEmpty ? "an unnamed algorithm" : shown), which authbroker never accepts (it accepts \(JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", "))); sign in again, and if this repeats, check the provider's signing settings")
        }
        // 3. Key.
        let candidates = try await chooseKeys(for: jws, algorithm: algorithm, metadata: metadata, provider: provider)
        // 4. Signature.
        var verified = Self.verifies(jws, with: candidates, algorithm: algorithm)
        if !verified, jws.header["kid"] == nil, let rotated = await onlyFittingKeyFetchedAgain(metadata, algorithm: algorithm) {
            // Without a kid, a key rotated since the set was fetched shows only here.
            verified = Self.verifies(jws, with: [rotated], algorithm: algorithm)
        }
        guard verified else {
            throw IDTokenError(.badSignature, "the ID token's \(algorithm.rawValue) signature does not match \(provider)'s key, so it may be forged; sign in again")
        }
        guard let claims = try? JSONDecoder().decode([String: JSONValue].self, from: Data(jws.payload)) else {
            throw IDTokenError(.invalidClaims, "the ID token from \(provider) carries no JSON claims; sign in again")
        }
        try Self.checkClaims(claims, issuer: metadata.issuer, clientID: clientID, nonce: nonce, now: now, skew: skew)
        do {
            return try IDTokenClaims(claims: claims)
        } catch {
            throw IDTokenError(.invalidClaims, "\(error.message); sign in again")
        }
    }

    /// Steps 5 to 9, on the verified claims.
    static func checkClaims(_ claims: [String: JSONValue], issuer: String, clientID: String, nonce expected: String?,
                            now: Date, skew: TimeInterval) throws(IDTokenError) {
        guard let iss = claims["iss"]?.stringValue else {
            throw IDTokenError(.wrongIssuer, "the ID token names no issuer; sign in again")
        }
        guard iss == issuer else {
            throw IDTokenError(.wrongIssuer, "the ID token was issued by \(ProviderAnswer.printable(iss, limit: 200)), not by \(issuer); check the provider's issuer in the configuration")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let audience)?: audiences = [audience]
        case .array(let values)?: audiences = values.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(clientID) else {
            throw IDTokenError(.wrongAudience, "the ID token is not meant for client \(clientID); check client_id in the configuration")
        }
        let azp = claims["azp"]?.stringValue
        if audiences.count > 1, azp == nil {
            throw IDTokenError(.missingAuthorizedParty, "the ID token has several audiences but does not say which client it was issued to (azp); sign in again")
        }
        if let azp, azp != clientID {
            throw IDTokenError(.wrongAuthorizedParty, "the ID token was issued to another client (azp); sign in again")
        }
        guard let exp = claims["exp"]?.numberValue else {
            throw IDTokenError(.expired, "the ID token has no expiry time (exp); sign in again")
        }
        let host = now.timeIntervalSince1970
        guard exp > host - skew else {
            throw IDTokenError(.expired, "the ID token expired at \(JWT.utc(exp)) (its exp) and this computer's clock says \(JWT.utc(host)): \(seconds(host - exp)) later, more than the \(seconds(skew)) the two clocks may differ by; one of them is wrong: check that this computer's clock is right, then sign in again",
                               clockDifference: exp - host)
        }
        guard let iat = claims["iat"]?.numberValue else {
            throw IDTokenError(.issuedInFuture, "the ID token has no issue time (iat); sign in again")
        }
        guard iat <= host + skew else {
            throw IDTokenError(.issuedInFuture, "the ID token was issued at \(JWT.utc(iat)) (its iat) and this computer's clock says only \(JWT.utc(host)): \(seconds(iat - host)) earlier, more than the \(seconds(skew)) the two clocks may differ by; one of them is wrong: check that this computer's clock is right, then sign in again",
                               clockDifference: iat - host)
        }
        if let expected {
            guard let nonce = claims["nonce"] else {
                throw IDTokenError(.missingNonce, "the ID token carries no nonce although the sign-in sent one; sign in again")
            }
            guard nonce.stringValue == expected else {
                throw IDTokenError(.wrongNonce, "the ID token's nonce is not the one this sign-in sent, so it may be replayed; sign in again")
            }
        }
    }

    /// "1 s", "185 s": whole seconds, rounded up so that a refusal never reads as within the window.
    private static func seconds(_ value: Double) -> String {
        "\(Int(value.rounded(.up))) s"
    }

    private static func verifies(_ jws: CompactJWS, with keys: [PublicKey], algorithm: JWSAlgorithm) -> Bool {
        keys.contains { (try? $0.verify(signature: jws.signature, message: jws.signingInput, algorithm: algorithm)) != nil }
    }

    /// For a token without `kid` whose signature the one fitting key did not verify: the
    /// set fetched again (at most once per `minimumRefetchInterval`, as for an unknown kid),
    /// and its only key that fits; nil when no fetch was made, it failed, or not one key fits.
    private func onlyFittingKeyFetchedAgain(_ metadata: ProviderMetadata, algorithm: JWSAlgorithm) async -> PublicKey? {
        guard let jwksURI = metadata.jwksURI, let fresh = try? await keys.refetch(jwksURI) else { return nil }
        let fitting = fresh.entries.filter { $0.jwk.isUsable(for: algorithm) }.compactMap { try? $0.publicKey.get() }
        return fitting.count == 1 ? fitting[0] : nil
    }

    /// The keys the signature may be checked with: those named by `kid` that fit the
    /// algorithm, or the only fitting key when there is no `kid`.
    private func chooseKeys(for jws: CompactJWS, algorithm: JWSAlgorithm, metadata: ProviderMetadata,
                            provider: String) async throws(IDTokenError) -> [PublicKey] {
        guard let jwksURI = metadata.jwksURI else {
            throw IDTokenError(.keysUnavailable, "\(provider) publishes no jwks_uri, so its ID tokens cannot be verified; check the issuer")
        }
        func fetched(_ fetch: () async throws(OAuthError) -> JWKSet?) async throws(IDTokenError) -> JWKSet? {
            do {
                return try await fetch()
            } catch {
                throw IDTokenError(.keysUnavailable, "the signing keys of \(provider) could not be fetched: \(error.message)", underlying: error)
            }
        }
        guard var set = try await fetched({ () async throws(OAuthError) -> JWKSet? in try await keys.keys(jwksURI) }) else {
            throw IDTokenError(.keysUnavailable, "the signing keys of \(provider) could not be fetched; try again")
        }
        guard let kidValue = jws.header["kid"] else {
            let fitting = set.entries.filter { $0.jwk.isUsable(for: algorithm) }.compactMap { try? $0.publicKey.get() }
            guard fitting.count == 1 else {
                throw IDTokenError(.noSuitableKey, "the ID token names no key (kid) and \(provider) has \(fitting.isEmpty ? "no" : "\(fitting.count)") \(algorithm.rawValue) keys, so authbroker cannot tell which one signed it; sign in again")
            }
            return fitting
        }
        guard let kid = kidValue.stringValue else {
            throw IDTokenError(.malformed, "the ID token's key ID (kid) is not a string; sign in again")
        }
        let shownKid = ProviderAnswer.printable(kid, limit: 64)
        var named = set.entries.filter { $0.jwk.kid == kid }
        if named.isEmpty {
            // The provider may have rotated its keys since the set was fetched.
            if let fresh = try await fetched({ () async throws(OAuthError) -> JWKSet? in try await keys.refetch(jwksURI) }) {
                set = fresh
                named = set.entries.filter { $0.jwk.kid == kid }
            }
        }
        guard !named.isEmpty else {
            throw IDTokenError(.unknownKeyID, "the ID token is signed with key \(shownKid), which \(provider) does not publish; sign in again, and if this repeats, check the provider's keys")
        }
        let fitting = named.filter { $0.jwk.isUsable(for: algorithm) }
        guard !fitting.isEmpty else {
            let kinds = named.map { entry in
                entry.jwk.kty + (entry.jwk.crv.map { " \($0)" } ?? "") + (entry.jwk.alg.map { " for \($0)" } ?? "")
                    + (entry.jwk.use.map { $0 == "sig" ? "" : " for use \($0)" } ?? "")
            }
            throw IDTokenError(.keyDoesNotFitAlgorithm, "the ID token claims \(algorithm.rawValue) but \(provider)'s key \(shownKid) is \(ProviderAnswer.printable(kinds.joined(separator: ", "), limit: 80)), so it may be forged; sign in again")
        }
        let usable = fitting.compactMap { try? $0.publicKey.get() }
        guard !usable.isEmpty else {
            let why = fitting.compactMap { entry -> String? in
                if case .failure(let error) = entry.publicKey { return error.message }
                return nil
            }.first ?? "it is not valid"
            throw IDTokenError(.keyDoesNotFitAlgorithm, "\(provider)'s key \(shownKid) cannot be used: \(why)")
        }
        return usable
    }
}

/// A JWS in compact serialization (RFC 7515 §7.1), split and decoded but not verified.
struct CompactJWS {
    /// The JOSE header.
    var header: [String: JSONValue]
    /// The decoded payload.
    var payload: [UInt8]
    /// The decoded signature.
    var signature: [UInt8]
    /// The ASCII of `header.payload` as received: what the signature covers.
    var signingInput: [UInt8]

    init(_ token: String) throws(IDTokenError) {
        func malformed(_ why: String) -> IDTokenError {
            IDTokenError(.malformed, "the ID token \(why); sign in again")
        }
        let bytes = Array(token.utf8)
        guard bytes.count <= IDTokenVerifier.maximumLength else {
            throw malformed("is longer than \(IDTokenVerifier.maximumLength) bytes")
        }
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            throw malformed(segments.count == 5 ? "is encrypted (JWE), which authbroker does not accept" : "is not a signed JWT (three parts separated by dots)")
        }
        let texts = segments.map { String(decoding: $0, as: UTF8.self) }
        guard !segments[0].isEmpty, let headerBytes = Base64URL.decode(texts[0]),
              let payload = Base64URL.decode(texts[1]), let signature = Base64URL.decode(texts[2])
        else { throw malformed("has a part that is not base64url") }
        guard let header = try? JSONDecoder().decode([String: JSONValue].self, from: Data(headerBytes)) else {
            throw malformed("has a header that is not a JSON object")
        }
        // RFC 7515 §4.1.11: extensions marked critical must be understood; authbroker knows none.
        guard header["crit"] == nil else { throw malformed("requires header extensions (crit) that authbroker does not understand") }
        self.header = header
        self.payload = payload
        self.signature = signature
        signingInput = Array(bytes[..<(segments[0].count + 1 + segments[1].count)])
    }
}
