import Glibc

/// An absolute `http://` or `https://` URL taken apart: what the client connects to and
/// what it puts in the request line. Parsed by hand (no Foundation), strictly: user info,
/// spaces, control or non-ASCII characters, IPv6 zone ids and ports beyond 65535 are
/// refused rather than guessed at.
public struct Endpoint: Sendable, Equatable {
    /// `http` or `https`.
    public enum Scheme: String, Sendable {
        case http, https

        /// 80 or 443.
        public var defaultPort: Int { self == .http ? 80 : 443 }
    }

    /// The URL's scheme.
    public let scheme: Scheme
    /// The host, lowercased, without brackets for IPv6 literals.
    public let host: String
    /// The port to connect to (the scheme's default when the URL gives none).
    public let port: Int
    /// True when the URL spelled out a port.
    public let hasExplicitPort: Bool
    /// Path and query as given, "/" when empty; never the fragment.
    public let target: String
    /// True when `host` is an IPv4 or IPv6 literal rather than a name.
    public let isIPLiteral: Bool

    /// Reads `url`; anything but an absolute http(s) URL is an `.invalidURL` whose reason
    /// does not quote the URL.
    public init(_ url: String) throws(HTTPClientError) {
        let bytes = Array(url.utf8)
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidURL(reason: "it holds spaces, control or non-ASCII characters")
        }
        guard let separator = url.firstRange(of: "://") else { throw .invalidURL(reason: "it is not an absolute URL") }
        guard let scheme = Scheme(rawValue: url[..<separator.lowerBound].lowercased()) else {
            throw .invalidURL(reason: "only http and https URLs are supported")
        }
        let rest = url[separator.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var target = rest[authorityEnd...]
        if let hash = target.firstIndex(of: "#") { target = target[..<hash] }
        guard !authority.contains("@") else { throw .invalidURL(reason: "user names and passwords in URLs are not supported") }

        let hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidURL(reason: "an IPv6 address lacks its closing bracket") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidURL(reason: "the host is followed by something that is not a port") }
                portPart = after.dropFirst()
            }
            guard Self.isIPv6(String(hostPart)) else { throw .invalidURL(reason: "the bracketed host is not an IPv6 address") }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                hostPart = authority[..<colon]
                portPart = authority[authority.index(after: colon)...]
            } else {
                hostPart = authority
            }
            guard !hostPart.isEmpty else { throw .invalidURL(reason: "it names no host") }
            let allowed = hostPart.utf8.allSatisfy { byte in
                (0x61...0x7A).contains(byte | 0x20) || (0x30...0x39).contains(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F
            }
            guard allowed else { throw .invalidURL(reason: "the host name holds characters a host name cannot have") }
        }

        var port = scheme.defaultPort
        var explicit = false
        if let portPart, !portPart.isEmpty {
            guard portPart.count <= 5, portPart.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let number = Int(portPart), (1...65535).contains(number)
            else { throw .invalidURL(reason: "the port is not a number from 1 to 65535") }
            port = number
            explicit = true
        }

        self.scheme = scheme
        self.host = hostPart.lowercased()
        self.port = port
        self.hasExplicitPort = explicit
        self.target = target.isEmpty ? "/" : (target.hasPrefix("/") ? String(target) : "/" + target)
        self.isIPLiteral = Self.isIPv6(self.host) || Self.isIPv4(self.host)
    }

    /// "host" or "host:port" (IPv6 in brackets) as the URL gave it: for error sentences.
    public var displayName: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return hasExplicitPort ? "\(name):\(port)" : name
    }

    /// The `Host` header's value: the port only when it is not the scheme's default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == scheme.defaultPort ? name : "\(name):\(port)"
    }

    /// "host:port" always, as a CONNECT request names its target.
    var authorityWithPort: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return "\(name):\(port)"
    }

    /// The absolute-form request target, for requests sent through an http proxy.
    var absoluteForm: String { "\(scheme.rawValue)://\(hostHeader)\(target)" }

    /// True for localhost, 127.0.0.0/8 and ::1. The one loopback rule: such a host is never
    /// sent through a proxy, and only such a host may be spoken to over plain http
    /// (OAuth's `EndpointPolicy`). Names under `.localhost` do not count: a resolver may
    /// send them anywhere.
    public var isLoopback: Bool { Self.isLoopback(host) }

    static func isLoopback(_ host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        if name == "localhost" { return true }
        if isIPv6(name) {
            var address = in6_addr()
            guard inet_pton(AF_INET6, name, &address) == 1 else { return false }
            return withUnsafeBytes(of: &address) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
        }
        guard isIPv4(name) else { return false }
        return name.hasPrefix("127.")
    }

    static func isIPv4(_ text: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, text, &address) == 1
    }

    static func isIPv6(_ text: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, text, &address) == 1
    }
}
