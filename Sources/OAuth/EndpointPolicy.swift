import HTTPClient

/// Which provider URLs authbroker talks to: `https://` anywhere, `http://` only on a
/// loopback host (127.0.0.0/8, ::1, localhost), for local test providers. The one rule for
/// every provider URL: discovered endpoints, and those set in config.toml.
public enum EndpointPolicy {
    /// Throws `.configuration` unless `url` is an absolute URL that the rule allows.
    /// `what` names the URL in the sentence, e.g. "issuer" or "token_endpoint".
    ///
    /// The URL is read by the same parser (`HTTPClient.Endpoint`) and judged loopback by the
    /// same rule that the connection later uses, so the check and the request cannot read
    /// one URL two ways.
    public static func check(_ url: String, what: String) throws(OAuthError) {
        let endpoint: Endpoint
        do {
            endpoint = try Endpoint(url)
        } catch {
            guard case .invalidURL(let reason) = error else { throw .configuration("\(what) \(describe(url)) cannot be read") }
            if let scheme = url.firstRange(of: "://").map({ url[..<$0.lowerBound].lowercased() }), scheme != "http", scheme != "https" {
                throw .configuration("\(what) \(describe(url)) must use https")
            }
            throw .configuration("\(what) \(describe(url)) is not a URL authbroker can use: \(reason)")
        }
        switch endpoint.scheme {
        case .https: return
        case .http where endpoint.isLoopback: return
        case .http: throw .configuration("\(what) \(describe(url)) must use https (http is allowed only on a loopback host)")
        }
    }

    /// An issuer (RFC 8414 §2, OpenID Connect Discovery §2): the rule above, and no query
    /// or fragment. Checked when config.toml is read and again before discovery.
    public static func checkIssuer(_ issuer: String, what: String) throws(OAuthError) {
        try check(issuer, what: what)
        guard !issuer.contains("?"), !issuer.contains("#") else {
            throw .configuration("\(what) \(describe(issuer)) must not have a query or a fragment")
        }
    }

    /// A URL for sentences: scheme, host, port and path, without user info, query or
    /// fragment, and cut to 200 characters.
    public static func describe(_ url: String) -> String {
        var bare = Substring(url)
        if let end = bare.firstIndex(where: { $0 == "?" || $0 == "#" }) { bare = bare[..<end] }
        if let schemeEnd = bare.firstRange(of: "://") {
            let authorityEnd = bare[schemeEnd.upperBound...].firstIndex(of: "/") ?? bare.endIndex
            if let at = bare[schemeEnd.upperBound..<authorityEnd].lastIndex(of: "@") {
                bare = bare[..<schemeEnd.upperBound] + bare[bare.index(after: at)...]
            }
        }
        let printable = bare.unicodeScalars.filter { $0.value >= 0x21 && $0.value < 0x7F }
        var text = String(String.UnicodeScalarView(printable))
        if text.count > 200 { text = String(text.prefix(200)) + "…" }
        return text
    }
}
