import HTTPClient

/// Resource identifiers (RFC 8707 §2, RFC 9728 §1.2) and the URLs derived from them.
public enum ResourceURL {
    /// Checks a resource a caller names: an absolute https URL (http only on a loopback
    /// host, by `EndpointPolicy.check`), without a fragment or user information. Throws
    /// `.configuration` with a sentence that says what to change.
    public static func check(_ resource: String) throws(OAuthError) {
        if resource.contains("#") {
            throw .configuration("the resource \(EndpointPolicy.describe(resource)) must not have a fragment (#…): name it without one (RFC 8707 §2)")
        }
        if let parts = split(resource), parts.authority.contains("@") {
            throw .configuration("the resource \(EndpointPolicy.describe(resource)) must not hold a user name or password: name it without them (RFC 8707 §2)")
        }
        try EndpointPolicy.check(resource, what: "the resource")
    }

    /// Where a resource publishes its metadata (RFC 9728 §3.1):
    /// "/.well-known/oauth-protected-resource" inserted between the host (and port) and
    /// the path; a query is kept after the path, and a path of just "/" adds nothing.
    /// `https://api.example/v1?x=1` gives
    /// `https://api.example/.well-known/oauth-protected-resource/v1?x=1`.
    public static func wellKnownMetadataURL(for resource: String) throws(OAuthError) -> String {
        try check(resource)
        return try inserting("/.well-known/oauth-protected-resource", into: resource, what: "the resource")
    }

    /// "scheme://host[:port]" of a URL, the host lowercased and the port only when it is
    /// not the scheme's default: two URLs are of one origin when these are equal. Nil for
    /// anything but an absolute http(s) URL.
    public static func origin(of url: String) -> String? {
        guard let endpoint = try? Endpoint(url), let host = host(of: url) else { return nil }
        let port = endpoint.port == endpoint.scheme.defaultPort ? "" : ":\(endpoint.port)"
        return "\(endpoint.scheme.rawValue)://\(host)\(port)"
    }

    /// The host of a URL, lowercased (an IPv6 literal in brackets), without the port: for
    /// sentences. Nil for anything but an absolute http(s) URL.
    public static func host(of url: String) -> String? {
        guard let endpoint = try? Endpoint(url) else { return nil }
        return endpoint.host.contains(":") ? "[\(endpoint.host)]" : endpoint.host
    }

    /// `url` with `suffix` put between its authority and its path (RFC 8414 §3.1, RFC 9728
    /// §3.1): a path of just "/" is dropped, a query kept after the path.
    static func inserting(_ suffix: String, into url: String, what: String) throws(OAuthError) -> String {
        guard let parts = split(url) else {
            throw .configuration("\(what) \(EndpointPolicy.describe(url)) is not an absolute URL")
        }
        let path = parts.path == "/" ? "" : parts.path
        return parts.scheme + "://" + parts.authority + suffix + path + parts.query
    }

    /// A URL's scheme, authority, path ("" or starting with "/") and query ("" or starting
    /// with "?"), as written; nil without "://". The fragment is left out.
    static func split(_ url: String) -> (scheme: Substring, authority: Substring, path: Substring, query: Substring)? {
        guard let separator = url.firstRange(of: "://") else { return nil }
        var rest = url[separator.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let queryStart = rest[authorityEnd...].firstIndex(of: "?") ?? rest.endIndex
        return (url[..<separator.lowerBound], rest[..<authorityEnd], rest[authorityEnd..<queryStart], rest[queryStart...])
    }
}
