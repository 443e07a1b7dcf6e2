import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reading JSON Web Tokens (RFC 7519) without verifying them.
public enum JWT {
    /// The claims of a compact JWS's payload, or nil when `jwt` is not three base64url
    /// segments whose middle one is a JSON object. The signature is NOT checked: use this
    /// only for tokens received straight from the provider's token endpoint over TLS
    /// (OpenID Connect Core §3.1.3.7).
    public static func decodeClaims(_ jwt: String) -> [String: JSONValue]? {
        let segments = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let payload = Base64URL.decode(String(segments[1])) else { return nil }
        return try? JSONDecoder().decode([String: JSONValue].self, from: Data(payload))
    }

    /// A Unix time (a JWT's `exp`, `iat`, or the host's clock) as a user reads it, in UTC
    /// to the second: "2027-01-15 08:00:00 UTC".
    public static func utc(_ seconds: Double) -> String {
        let iso = Date(timeIntervalSince1970: seconds.rounded(.down)).formatted(.iso8601)  // 2027-01-15T08:00:00Z
        return iso.replacing("T", with: " ").replacing("Z", with: " UTC")
    }
}

/// The claims of an ID token (OpenID Connect Core §2) that authbroker uses, plus all of them.
public struct IDTokenClaims: Sendable, Equatable {
    /// Issuer.
    public var iss: String
    /// Subject: the user's stable identifier at the issuer.
    public var sub: String
    /// `aud`, which the token may give as one string or an array.
    public var aud: [String]
    /// Expiry.
    public var exp: Date
    /// Issue time.
    public var iat: Date
    /// The nonce of the authentication request, if one was sent.
    public var nonce: String?
    /// Authorized party: the client the token was issued to.
    public var azp: String?
    /// `name`.
    public var name: String?
    /// `email`.
    public var email: String?
    /// `preferred_username`.
    public var preferredUsername: String?
    /// Every claim, including the ones above.
    public var all: [String: JSONValue]

    /// Reads the claims of an unverified ID token (see `JWT.decodeClaims`).
    /// `IDTokenVerifier.verify` checks the signature and every claim and returns these
    /// claims only for a good token: prefer it.
    public init(jwt: String) throws(OAuthError) {
        guard let claims = JWT.decodeClaims(jwt) else { throw .invalidResponse("the ID token is not a readable JWT") }
        try self.init(claims: claims)
    }

    /// Picks the known claims out of `claims`; iss, sub, aud, exp and iat are required.
    public init(claims: [String: JSONValue]) throws(OAuthError) {
        func string(_ name: String) throws(OAuthError) -> String {
            guard let value = claims[name]?.stringValue else { throw .invalidResponse("the ID token has no \(name) claim") }
            return value
        }
        func time(_ name: String) throws(OAuthError) -> Date {
            guard let value = claims[name]?.numberValue else { throw .invalidResponse("the ID token has no \(name) claim") }
            return Date(timeIntervalSince1970: value)
        }
        switch claims["aud"] {
        case .string(let audience)?: aud = [audience]
        case .array(let audiences)? where !audiences.isEmpty && audiences.allSatisfy({ $0.stringValue != nil }):
            aud = audiences.compactMap(\.stringValue)
        default: throw .invalidResponse("the ID token has no aud claim")
        }
        iss = try string("iss")
        sub = try string("sub")
        exp = try time("exp")
        iat = try time("iat")
        nonce = claims["nonce"]?.stringValue
        azp = claims["azp"]?.stringValue
        name = claims["name"]?.stringValue
        email = claims["email"]?.stringValue
        preferredUsername = claims["preferred_username"]?.stringValue
        all = claims
    }

    /// Checks what can be checked without the signature (OpenID Connect Core §3.1.3.7
    /// steps 2, 3, 5 and 9, and 11 when `nonce` is given): the issuer, the audience, the
    /// authorized party if present, the expiry with `skew` seconds of tolerance, and the nonce.
    public func validateBasic(issuer: String, clientID: String, now: Date = Date(), skew: TimeInterval = 60,
                              nonce expectedNonce: String? = nil) throws(OAuthError) {
        guard iss == issuer else {
            throw .invalidResponse("the ID token was issued by \(ProviderAnswer.printable(iss, limit: 200)), not by \(issuer)")
        }
        guard aud.contains(clientID) else { throw .invalidResponse("the ID token is not meant for client \(clientID)") }
        if let azp, azp != clientID { throw .invalidResponse("the ID token was issued to another client") }
        guard exp.timeIntervalSince(now) > -skew else {
            throw .invalidResponse("the ID token expired at \(exp.formatted(.iso8601))")
        }
        if let expectedNonce, nonce != expectedNonce { throw .invalidResponse("the ID token's nonce does not match the request's") }
    }
}
