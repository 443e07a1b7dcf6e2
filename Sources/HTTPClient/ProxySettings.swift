import Glibc

/// An http proxy: where it listens and, when its URL carried `user:password@`, the
/// `Proxy-Authorization` value to send. The credentials are never printed.
public struct ProxyServer: Sendable, Equatable, CustomStringConvertible {
    /// The proxy's host (lowercased, no brackets).
    public let host: String
    /// The proxy's port (1080 when its URL gives none, as curl does).
    public let port: Int
    /// "Basic …" when the proxy URL carried credentials.
    let authorization: String?

    /// "host:port", for sentences: never the credentials.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Reads a proxy setting such as `http://proxy:3128` or `user:pass@proxy:3128`; nil
    /// unless it is a plain http proxy (https and socks proxies are not supported).
    init?(_ setting: String) {
        var text = Substring(setting.trimmingSpaces)
        if let separator = text.firstRange(of: "://") {
            guard text[..<separator.lowerBound].lowercased() == "http" else { return nil }
            text = text[separator.upperBound...]
        }
        if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        var authorization: String?
        if let at = text.lastIndex(of: "@") {
            let credentials = PercentDecoding.decode(text[..<at], plusIsSpace: false)
            authorization = "Basic " + Base64.encode(Array(credentials.utf8))
            text = text[text.index(after: at)...]
        }
        guard let endpoint = try? Endpoint("http://" + text) else { return nil }
        self.host = endpoint.host
        self.port = endpoint.hasExplicitPort ? endpoint.port : 1080
        self.authorization = authorization
    }
}

/// Which proxy, if any, carries a request, decided from the environment the way curl
/// decides: `https_proxy`/`HTTPS_PROXY` for https URLs (a CONNECT tunnel), `http_proxy`/
/// `HTTP_PROXY` for http URLs (absolute-form requests), and `no_proxy`/`NO_PROXY` for the
/// exceptions: a comma-separated list of `*`, exact hosts, domain suffixes with or
/// without a leading dot, or address ranges (`10.0.0.0/8`) for URLs that name an IP
/// address; ports in it are ignored. Loopback hosts never use a proxy.
public struct ProxySettings: Sendable, Equatable {
    /// What the environment asks for one scheme.
    enum Choice: Sendable, Equatable {
        /// No proxy variable is set.
        case direct
        /// Use this proxy.
        case proxy(ProxyServer)
        /// The variable (named) is set to something this client cannot use.
        case unusable(variable: String)
    }

    let https: Choice
    let http: Choice
    /// The `no_proxy` entries, lowercased, without ports or leading dots; "*" for all.
    let exceptions: [String]
    /// The entries of `exceptions` that are address ranges.
    let ranges: [AddressRange]
    /// Tests only: send loopback hosts through the proxy too, so that a proxy stub can be
    /// tested against local servers.
    var proxiesLoopback = false

    /// No proxy at all.
    public static let none = ProxySettings(environment: [:])

    /// Reads the proxy variables from `environment` (lowercase names win over uppercase).
    public init(environment: [String: String]) {
        func value(_ names: String...) -> (name: String, value: String)? {
            for name in names {
                if let value = environment[name], !value.trimmingSpaces.isEmpty { return (name, value) }
            }
            return nil
        }
        func choice(_ names: String...) -> Choice {
            guard let (name, setting) = value(names[0], names[1]) else { return .direct }
            return ProxyServer(setting).map(Choice.proxy) ?? .unusable(variable: name)
        }
        https = choice("https_proxy", "HTTPS_PROXY")
        http = choice("http_proxy", "HTTP_PROXY")
        let list = value("no_proxy", "NO_PROXY")?.value ?? ""
        exceptions = list.split(separator: ",").compactMap { entry in
            var item = Substring(String(entry).trimmingSpaces.lowercased())
            if item.hasPrefix("[") {
                guard let close = item.firstIndex(of: "]") else { return nil }
                item = item[item.index(after: item.startIndex)..<close]
            } else if item.filter({ $0 == ":" }).count == 1, let colon = item.firstIndex(of: ":") {
                item = item[..<colon]
            }
            while item.hasPrefix(".") { item = item.dropFirst() }
            if item.hasSuffix(".") { item = item.dropLast() }
            return item.isEmpty ? nil : String(item)
        }
        ranges = exceptions.compactMap(AddressRange.init)
    }

    /// The proxy settings of this process's environment.
    public static func fromProcessEnvironment() -> ProxySettings {
        var environment: [String: String] = [:]
        for name in ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return ProxySettings(environment: environment)
    }

    /// The proxy for `endpoint`, `.direct` when it goes straight to the server.
    func choice(for endpoint: Endpoint) -> Choice {
        if (endpoint.isLoopback && !proxiesLoopback) || isException(endpoint.host) { return .direct }
        return endpoint.scheme == .https ? https : http
    }

    /// The proxy `endpoint` would use, or nil for a direct connection (or an unusable
    /// setting, which `HTTPClient` reports as `.proxyFailed`).
    public func proxy(for endpoint: Endpoint) -> ProxyServer? {
        if case .proxy(let server) = choice(for: endpoint) { return server }
        return nil
    }

    private func isException(_ host: String) -> Bool {
        var name = Substring(host)
        if name.hasSuffix(".") { name = name.dropLast() }
        return exceptions.contains { entry in
            entry == "*" || name == entry || name.hasSuffix("." + entry)
        } || ranges.contains { $0.contains(host) }
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}

/// Standard base64 (RFC 4648 §4) for the Basic scheme.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let b0 = chunk[chunk.startIndex]
            let b1 = chunk.count > 1 ? chunk[chunk.startIndex + 1] : 0
            let b2 = chunk.count > 2 ? chunk[chunk.startIndex + 2] : 0
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            output.append(chunk.count > 1 ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            output.append(chunk.count > 2 ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
