/// How long an answer may be kept, from its `Cache-Control` header (RFC 9111 §5.2.2), as a
/// private cache reads it.
public enum CacheControl {
    /// The lifetime in seconds: `max-age=N` (also `max-age="N"`) at most
    /// `ProviderAnswer.longestLifetime`; 0 when `no-store` or `no-cache` is present, or when
    /// `max-age` is not a number (RFC 9111 §4.2.1: stale); the smallest of several;
    /// nil without a header or a `max-age`.
    public static func maxAge(_ header: String?) -> Int? {
        guard let header else { return nil }
        var lifetime: Int?
        for directive in header.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = trimmed(parts[0]).lowercased()
            if name == "no-store" || name == "no-cache" { return 0 }
            guard name == "max-age" else { continue }
            var value = parts.count > 1 ? trimmed(parts[1]) : ""
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = value.dropFirst().dropLast() }
            let seconds: Int
            if !value.isEmpty, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                seconds = min(Int(value) ?? ProviderAnswer.longestLifetime, ProviderAnswer.longestLifetime)
            } else {
                seconds = 0
            }
            lifetime = min(lifetime ?? seconds, seconds)
        }
        return lifetime
    }

    /// The lifetime `response` gives.
    public static func maxAge(of response: HTTPResponse) -> Int? { maxAge(response.headers["cache-control"]) }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
