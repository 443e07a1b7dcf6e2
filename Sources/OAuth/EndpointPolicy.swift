#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which provider URLs authbroker talks to: `https://` anywhere, `http://` only on a
/// loopback host (127.0.0.0/8, ::1, localhost), for local test providers. The one rule for
/// every provider URL: discovered endpoints, and those set in config.toml.
public enum EndpointPolicy {
    /// Throws `.configuration` unless `url` is an absolute URL that the rule allows.
    /// `what` names the URL in the sentence, e.g. "issuer" or "token_endpoint".
    public static func check(_ url: String, what: String) throws(OAuthError) {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
              let host = parsed.host, !host.isEmpty
        else { throw .configuration("\(what) \(describe(url)) is not an absolute URL") }
        switch scheme {
        case "https": return
        case "http" where isLoopback(host): return
        case "http": throw .configuration("\(what) \(describe(url)) must use https (http is allowed only on a loopback host)")
        default: throw .configuration("\(what) \(describe(url)) must use https")
        }
    }

    /// True for localhost, 127.0.0.0/8 and ::1 (with or without brackets).
    static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { octet in octet.utf8.allSatisfy { (48...57).contains($0) } && UInt8(octet) != nil }
    }

    /// "host" or "host:port", for sentences: never the path or the query.
    static func hostAndPort(_ url: URL) -> String {
        guard var host = url.host else { return "the provider" }
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        if let port = url.port { return "\(host):\(port)" }
        return host
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
