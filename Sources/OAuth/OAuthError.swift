/// Why an OAuth call failed. `message` is a sentence fit for a user; none of the cases
/// ever carries a token, secret or code.
public enum OAuthError: Error, Sendable, Equatable {
    /// No answer: connection refused, DNS, TLS, time-out.
    case unreachable(String)
    /// The provider answered with an OAuth error (RFC 6749 §5.2 `error`), or with an empty
    /// 400, which `oauthCode` then reports as `invalid_grant`.
    case provider(oauthCode: String, description: String?, httpStatus: Int)
    /// The provider answered something that is not a valid answer (5xx, garbage JSON,
    /// missing fields).
    case invalidResponse(String)
    /// The configuration or the discovery document is not acceptable (http on a
    /// non-loopback host, issuer mismatch, missing endpoint).
    case configuration(String)
    /// An endpoint the discovery document named answered HTTP 404: the document may be
    /// out of date, so the caller reads it again.
    case endpointNotFound(String)
    /// The provider said it cannot take the request now (HTTP 429 or 503, or the error
    /// `temporarily_unavailable`), perhaps with when to come back (`Retry-After`): nothing
    /// was refused, and the request was most likely not carried out.
    case busy(String, retryAfter: RetryAfter?)

    public var message: String {
        switch self {
        case .unreachable(let m), .invalidResponse(let m), .configuration(let m), .endpointNotFound(let m), .busy(let m, _): return m
        case .provider(let code, let description, _):
            if let description, !description.isEmpty { return "the provider answered \(code): \(description)" }
            return "the provider answered \(code)"
        }
    }

    /// True for `invalid_grant`: the refresh token (or device code) is no longer good.
    public var isInvalidGrant: Bool {
        if case .provider(let code, _, _) = self { return code == "invalid_grant" }
        return false
    }

    /// True when the answer to a refresh says the refresh token is no longer good:
    /// `invalid_grant`, or `invalid_request` whose description names the refresh token, as
    /// providers answer for a refresh token they no longer have (Dex: "Refresh token is
    /// invalid or has already been claimed by another client."). An `invalid_request` that
    /// does not name it may be about any other parameter, so it does not count.
    public var refusesRefreshToken: Bool {
        guard case .provider(let code, let description, _) = self else { return false }
        if code == "invalid_grant" { return true }
        return code == "invalid_request" && description?.lowercased().contains("refresh") == true
    }

    /// True when no answer came (no connection, a time-out, a broken answer): the request
    /// may or may not have been carried out by the provider.
    public var isNoAnswer: Bool {
        switch self {
        // A busy answer may come from a proxy in front of a provider that did take the request.
        case .unreachable, .invalidResponse, .busy: return true
        case .provider, .configuration, .endpointNotFound: return false
        }
    }
}

/// When a provider asked to be asked again (`Retry-After`, RFC 9110 §10.2.3): a number of
/// seconds, or an HTTP-date.
public enum RetryAfter: Sendable, Equatable {
    case seconds(Int)
    /// Unix seconds.
    case date(Int64)

    /// The header's value; nil when it is neither form (then the usual back-off applies).
    /// Only the IMF-fixdate form of HTTP-date is read ("Sun, 06 Nov 1994 08:49:37 GMT"),
    /// the one RFC 9110 §5.6.7 says senders generate.
    public init?(header: String) {
        var value = Substring(header)
        while value.first == " " || value.first == "\t" { value.removeFirst() }
        while value.last == " " || value.last == "\t" { value.removeLast() }
        if !value.isEmpty, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            self = .seconds(Int(value.prefix(9)) ?? 0)
            return
        }
        let parts = value.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), let monthIndex = months.firstIndex(of: String(parts[2])), let year = Int(parts[3]),
              (1...31).contains(day), (1970...9999).contains(year) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, let h = Int(clock[0]), let m = Int(clock[1]), let s = Int(clock[2]),
              (0...23).contains(h), (0...59).contains(m), (0...60).contains(s) else { return nil }
        // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
        let month = monthIndex + 1
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let shifted: Int = month > 2 ? month - 3 : month + 9
        let dayOfYear: Int = (153 * shifted + 2) / 5 + day - 1
        let dayOfEra: Int = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days: Int = era * 146_097 + dayOfEra - 719_468
        let secondOfDay: Int = h * 3600 + m * 60 + s
        self = .date(Int64(days) * 86_400 + Int64(secondOfDay))
    }

    /// The `Retry-After` of `response`; nil without one. An HTTP-date is the provider's
    /// clock's: it is read against the same answer's `Date` header (RFC 9110 §6.6.1) and
    /// becomes seconds, so a provider clock ahead of ours does not stretch the wait, nor
    /// one behind cut it to nothing.
    public init?(response: HTTPResponse) {
        guard let value = response.headers["retry-after"].flatMap(RetryAfter.init(header:)) else { return nil }
        if case .date(let at) = value, let date = response.headers["date"].flatMap(RetryAfter.init(header:)),
           case .date(let sent) = date {
            self = .seconds(Int(clamping: max(0, at - sent)))
        } else {
            self = value
        }
    }

    /// Whole seconds from `now` (Unix seconds) until then; 0 when it is past.
    public func seconds(from now: Double) -> Int {
        switch self {
        case .seconds(let s): return max(0, s)
        case .date(let at): return max(0, Int((Double(at) - now).rounded(.up)))
        }
    }
}
