import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reads the JSON answers of the token, device authorization and revocation endpoints
/// (RFC 6749 §5.1/§5.2, RFC 8628 §3.2, RFC 7009 §2.2). Sentences never quote the body,
/// which might echo a credential; only `error` and `error_description` are passed on,
/// reduced to printable ASCII and cut short.
public enum ProviderAnswer {
    /// The answer's JSON object on HTTP 200; otherwise the error it stands for.
    /// `place` names the endpoint, e.g. "token endpoint". `secrets` are the credentials the
    /// request carried: a provider's `error` and `error_description` never show them
    /// (`redacting`), since some quote back the parameter they refuse.
    /// `typed` is a typed password (never a String): a description that quotes it is not
    /// shown at all (`quotes`).
    static func object(_ response: HTTPResponse, place: String, sent secrets: [String] = [],
                       typed: SecretBytes? = nil) throws(OAuthError) -> [String: JSONValue] {
        if response.status == 404 {
            // Whatever the body says: the endpoint is not there (any more).
            throw .endpointNotFound("the provider's \(place) answered HTTP 404 (not found)")
        }
        let json = try? JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        // "Not now" is no refusal, whatever the status: the request was not carried out.
        // The device flow's own "not yet" answers (RFC 8628 §3.5) stay what they say, even
        // with HTTP 429.
        let code = json?["error"]?.stringValue
        let polling = code == "authorization_pending" || code == "slow_down"
        if !polling, response.status == 429 || response.status == 503 || (code == "temporarily_unavailable" && json?["access_token"] == nil) {
            let retryAfter = RetryAfter(response: response)
            let said = code == "temporarily_unavailable" ? "temporarily_unavailable" : "HTTP \(response.status)\(statusHint(response.status))"
            throw .busy("the provider's \(place) answered \(said)", retryAfter: retryAfter)
        }
        // Some providers (GitHub) answer errors with HTTP 200.
        if let json, response.status < 500, let code = json["error"]?.stringValue, json["access_token"] == nil {
            // Only the start of a long text can be shown: the searches for secrets read no more.
            throw .provider(oauthCode: printable(redacting(String(code.prefix(256)), secrets), limit: 64),
                            description: json["error_description"]?.stringValue.map { full in
                                let text = String(full.prefix(1024))
                                if let typed, quotes(text, typed) { return "(not shown: it quoted the password)" }
                                return printable(redacting(text, secrets), limit: 200)
                            },
                            httpStatus: response.status)
        }
        if response.status == 200 {
            guard let json else { throw .invalidResponse("the provider's \(place) answered with something that is not a JSON object") }
            return json
        }
        let blank = response.body.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        if response.status == 400, blank {
            // Glewlwyd answers a bad or reused refresh token this way.
            throw .provider(oauthCode: "invalid_grant", description: "the provider refused the grant", httpStatus: 400)
        }
        if response.status == 401, json == nil {
            throw .provider(oauthCode: "invalid_client", description: "the provider refused the client's credentials", httpStatus: 401)
        }
        if response.status == 403, json == nil {
            // A refusal, not an outage: retrying will not help, so it is not "unreachable".
            throw .provider(oauthCode: "unauthorized_client", description: "the provider refused this request for this client (HTTP 403)", httpStatus: 403)
        }
        throw .invalidResponse("the provider's \(place) answered HTTP \(response.status)\(statusHint(response.status))")
    }

    /// A token answer (RFC 6749 §5.1). `token_type` must be Bearer or DPoP (RFC 9449 §5),
    /// in any case (§7.1); it is returned as "Bearer" or "DPoP". `expires_in` may be a number or a string of digits;
    /// without it, a JWT access token's own lifetime (`statedLifetime`) is taken.
    /// `untyped` also takes RFC 8693's "N_A", for an exchanged token that is no access token.
    static func tokens(_ json: [String: JSONValue], untyped: Bool = false) throws(OAuthError) -> TokenResponse {
        guard let accessToken = json["access_token"]?.stringValue, !accessToken.isEmpty else {
            throw .invalidResponse("the provider's token answer has no access_token")
        }
        guard let tokenType = json["token_type"]?.stringValue else {
            throw .invalidResponse("the provider's token answer has no token_type")
        }
        // DPoP-bound tokens (RFC 9449 §5) come as "DPoP"; the case is normalised for callers.
        let normalized: String
        switch tokenType.lowercased() {
        case "bearer": normalized = "Bearer"
        case "dpop": normalized = "DPoP"
        case "n_a" where untyped: normalized = "N_A"
        default:
            // Not a broken answer but the client's set-up: the provider answers the same every
            // time, so it is no outage to back off from and retry.
            throw .configuration("the provider issued a token of type \(printable(tokenType, limit: 32)), which authbroker cannot use (it uses Bearer tokens, and DPoP ones with dpop set for the provider): set the client's token type to Bearer at the provider")
        }
        return TokenResponse(
            accessToken: accessToken, tokenType: normalized,
            expiresIn: try seconds(json["expires_in"], name: "expires_in", answer: "token") ?? statedLifetime(accessToken),
            refreshToken: token(json["refresh_token"]), idToken: token(json["id_token"]),
            scope: json["scope"]?.stringValue)
    }

    /// The lifetime a JWT access token states itself (RFC 9068 §2.2 requires `iat` and
    /// `exp`), for an answer without `expires_in`, which RFC 6749 §5.1 only recommends:
    /// `exp` − `iat`, both by the provider's clock, so a clock that differs from ours
    /// changes nothing. Nil for an opaque token (or one without both claims), which gets
    /// the broker's default lifetime.
    static func statedLifetime(_ accessToken: String) -> Int? {
        guard let claims = JWT.decodeClaims(accessToken), let exp = claims["exp"]?.numberValue,
              let iat = claims["iat"]?.numberValue, exp.isFinite, iat.isFinite else { return nil }
        let life = (exp - iat).rounded(.down)
        return life <= 0 ? 0 : life < Double(longestLifetime) ? Int(life) : longestLifetime
    }

    /// A token member's value; nil when absent, null, not a string, or empty or blank:
    /// some providers that do not rotate send `"refresh_token": ""`, which is no token and
    /// must not replace the one that works.
    private static func token(_ value: JSONValue?) -> String? {
        guard let text = value?.stringValue, text.contains(where: { $0 != " " && $0 != "\t" && $0 != "\n" && $0 != "\r" }) else {
            return nil
        }
        return text
    }

    /// A refresh answer: `tokens(_:)`, except that an answer whose access token cannot be
    /// used but which carries a refresh token comes back with `unusable` set instead of
    /// throwing, so that the rotated refresh token is not lost with it.
    static func refreshedTokens(_ json: [String: JSONValue]) throws(OAuthError) -> TokenResponse {
        do {
            return try tokens(json)
        } catch {
            guard let refreshToken = token(json["refresh_token"]) else { throw error }
            return TokenResponse(accessToken: "", tokenType: "", expiresIn: nil, refreshToken: refreshToken, idToken: nil,
                                 scope: nil, unusable: error)
        }
    }

    /// A device authorization answer (RFC 8628 §3.2); `verification_url` (Google) is read
    /// as `verification_uri`. An absent or unusable interval becomes 5 seconds.
    static func deviceAuthorization(_ json: [String: JSONValue]) throws(OAuthError) -> DeviceAuthorization {
        func required(_ name: String) throws(OAuthError) -> String {
            guard let value = json[name]?.stringValue, !value.isEmpty else {
                throw .invalidResponse("the provider's device authorization answer has no \(name)")
            }
            return value
        }
        let verificationURI = json["verification_uri"] == nil && json["verification_url"] != nil
            ? try required("verification_url") : try required("verification_uri")
        guard let expiresIn = try seconds(json["expires_in"], name: "expires_in", answer: "device authorization") else {
            throw .invalidResponse("the provider's device authorization answer has no expires_in")
        }
        let interval = json["interval"]?.integerValue.flatMap { $0 >= 1 ? $0 : nil } ?? 5
        return DeviceAuthorization(
            deviceCode: try required("device_code"), userCode: try required("user_code"),
            verificationURI: verificationURI, verificationURIComplete: json["verification_uri_complete"]?.stringValue,
            expiresIn: expiresIn, interval: interval)
    }

    /// The longest lifetime taken as said: ten years. A longer one (a provider that means
    /// "never" may send Int64.max) counts as ten years, so every expiry stays an ordinary
    /// Unix time; such a token is refreshed after ten years instead of never.
    public static let longestLifetime = 315_360_000

    /// Whole non-negative seconds, from a number or a string of digits, at most
    /// `longestLifetime`; nil when absent.
    private static func seconds(_ value: JSONValue?, name: String, answer: String) throws(OAuthError) -> Int? {
        switch value {
        case nil, .null?:
            return nil
        case .number(let number)? where number.isFinite && number >= 0:
            return number < Double(longestLifetime) ? Int(number) : longestLifetime
        case .string(let text)? where !text.isEmpty && text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }):
            return min(Int(text) ?? longestLifetime, longestLifetime)
        default:
            throw .invalidResponse("the provider's \(answer) answer has an \(name) that is not a number of seconds")
        }
    }

    /// Explains statuses that need it.
    static func statusHint(_ status: Int) -> String {
        switch status {
        case 300..<400: return " (a redirect, which authbroker does not follow)"
        case 404: return " (not found: check the issuer)"
        case 429: return " (too many requests)"
        default: return ""
        }
    }

    /// `text` with every credential of `secrets` taken out: each one whole and form-encoded,
    /// and any word of 8 or more token characters that is part of one (a provider may quote
    /// a token cut short), replaced by `[redacted]`. Runs before `printable` cuts the text,
    /// so no cut can leave part of a secret that was whole before. Values shorter than 6
    /// characters are no credentials a provider issues, and replacing them would garble the text.
    static func redacting(_ text: String, _ secrets: [String]) -> String {
        let secrets = secrets.filter { $0.count >= 6 }
        guard !secrets.isEmpty else { return text }
        var text = text
        for secret in secrets {
            text = text.replacing(secret, with: redacted)
            let encoded = FormEncoding.escape(secret)
            if encoded != secret { text = text.replacing(encoded, with: redacted) }
        }
        // Words of token characters (RFC 6749 Appendix A's VSCHAR without quotes and
        // separators), trimmed of the dots that end sentences.
        func isTokenCharacter(_ c: Character) -> Bool {
            c.isASCII && (c.isLetter || c.isNumber || "-._~+/=%".contains(c))
        }
        var out = ""
        var word = ""
        func flush() {
            var core = Substring(word)
            while core.first == "." { core.removeFirst() }
            while core.last == "." { core.removeLast() }
            if core.count >= 8, secrets.contains(where: { $0.contains(core) || FormEncoding.escape($0).contains(core) }) {
                out += word.replacing(core, with: redacted)
            } else {
                out += word
            }
            word = ""
        }
        for c in text {
            if isTokenCharacter(c) { word.append(c) } else { flush(); out.append(c) }
        }
        flush()
        return out
    }

    static let redacted = "[redacted]"

    /// Whether `text` quotes `secret`: whole, or by any word of 6 or more token characters
    /// that is part of it. Reads the secret in place, making no copy of it.
    static func quotes(_ text: String, _ secret: SecretBytes) -> Bool {
        let bytes = Array(text.utf8)
        return secret.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Bool in
            func occurs(_ needle: ArraySlice<UInt8>, in haystack: UnsafeRawBufferPointer) -> Bool {
                guard !needle.isEmpty, needle.count <= haystack.count else { return false }
                for start in 0...(haystack.count - needle.count)
                where zip(needle, haystack[start..<(start + needle.count)]).allSatisfy({ $0 == $1 }) {
                    return true
                }
                return false
            }
            guard raw.count >= 4 else { return false }
            // The whole secret in the text.
            if raw.count <= bytes.count {
                for start in 0...(bytes.count - raw.count)
                where zip(bytes[start..<(start + raw.count)], raw).allSatisfy({ $0 == $1 }) {
                    return true
                }
            }
            // A word of the text in the secret: split at bytes that are not token characters.
            var wordStart = 0
            for index in 0...bytes.count {
                let isWordByte = index < bytes.count && bytes[index] > 0x20 && bytes[index] < 0x7F
                    && !"\"'`,;()[]{}<>".utf8.contains(bytes[index])
                if isWordByte { continue }
                if index - wordStart >= 6, occurs(bytes[wordStart..<index], in: raw) { return true }
                wordStart = index + 1
            }
            return false
        }
    }

    /// `text` reduced to printable ASCII (RFC 6749 §5.2's character set) and `limit` characters.
    /// Also used for provider text that arrives elsewhere (a redirect's `error`).
    public static func printable(_ text: String, limit: Int) -> String {
        let kept = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(limit)
        return String(String.UnicodeScalarView(kept))
    }
}
