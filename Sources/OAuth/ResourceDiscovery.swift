/// Finds, from a resource alone, who issues its tokens: the resource's metadata (RFC 9728)
/// names its authorization servers, whose own metadata (RFC 8414, or OpenID Connect
/// discovery) names their endpoints. Holds no state; every call fetches. Redirects are
/// never followed: metadata is only believed from the URL it belongs at.
public struct ResourceDiscovery: Sendable {
    /// How requests travel; `NetworkTransport` in the daemon, a stub in tests.
    public let transport: any HTTPTransport

    /// The largest resource metadata document read: 64 KiB.
    public static let maximumMetadataSize = 64 << 10

    /// Makes a discovery that sends through `transport`.
    public init(transport: any HTTPTransport) {
        self.transport = transport
    }

    /// Fetches and checks the metadata of `resource` (RFC 9728 §3): from `metadataURL`, the
    /// `resource_metadata` of a 401's `WWW-Authenticate` (§5.1), when given, else from the
    /// well-known URL (`ResourceURL.wellKnownMetadataURL`). Refused, with a sentence: a
    /// resource `ResourceURL.check` refuses, a metadata URL `EndpointPolicy.check` refuses,
    /// any answer but 200 (redirects included), a body over 64 KiB, a document that is not
    /// JSON or has a member of the wrong type, one for another resource (§3.3), one that
    /// names no authorization server or one `EndpointPolicy.checkIssuer` refuses.
    public func protectedResourceMetadata(for resource: String,
                                          metadataURL: String?) async throws(OAuthError) -> Fetched<ProtectedResourceMetadata> {
        try ResourceURL.check(resource)
        let url: String
        if let metadataURL {
            try EndpointPolicy.check(metadataURL, what: "the resource_metadata URL given for \(EndpointPolicy.describe(resource))")
            url = metadataURL
        } else {
            url = try ResourceURL.wellKnownMetadataURL(for: resource)
        }
        let response = try await transport.send(HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"]))
        let place = "the resource metadata at \(EndpointPolicy.describe(url))"
        guard response.status == 200 else {
            if response.status == 404 {
                throw .configuration("\(place) answered HTTP 404 (not found): \(EndpointPolicy.describe(resource)) publishes no resource metadata (RFC 9728) there, so authbroker cannot find its authorization server; set its provider in config.toml")
            }
            throw Self.refusal(response, url: url, place: place)
        }
        guard response.body.count <= Self.maximumMetadataSize else {
            throw .invalidResponse("\(place) is larger than 64 KiB, more than any resource metadata needs; the resource's administrators must correct it")
        }
        let metadata = try ProtectedResourceMetadata.decoded(from: response.body, place: place)
        try Self.check(metadata, resource: resource, place: place)
        return Fetched(value: metadata, maxAge: CacheControl.maxAge(of: response))
    }

    /// Fetches and checks the metadata of the authorization server `issuer`: RFC 8414 §3.1
    /// first, then OpenID Connect discovery (`metadataURLs`), moving to the next URL only
    /// when one answers a 4xx that says the document is not there (not 429). Any other
    /// failure stops. The document must name exactly `issuer` (RFC 8414 §3.3) and every
    /// endpoint must be https (or http on loopback), as `OAuthClient.discover` checks.
    public func authorizationServerMetadata(issuer: String) async throws(OAuthError) -> Fetched<ProviderMetadata> {
        try EndpointPolicy.checkIssuer(issuer, what: "the authorization server")
        var absent: [String] = []
        for url in try Self.metadataURLs(issuer: issuer) {
            let response = try await transport.send(HTTPRequest(method: "GET", url: url, headers: ["Accept": "application/json"]))
            if (400..<500).contains(response.status), response.status != 429 {
                absent.append("\(EndpointPolicy.describe(url)) (HTTP \(response.status))")
                continue
            }
            let place = "the authorization server metadata at \(EndpointPolicy.describe(url))"
            guard response.status == 200 else { throw Self.refusal(response, url: url, place: place) }
            let metadata = try ProviderMetadata.checked(response.body, place: place, issuer: issuer, asked: "as asked")
            return Fetched(value: metadata, maxAge: CacheControl.maxAge(of: response))
        }
        throw .configuration("the authorization server \(EndpointPolicy.describe(issuer)) publishes no metadata where RFC 8414 and OpenID Connect discovery put it: \(absent.joined(separator: ", ")); check the issuer, or set the provider's endpoints in config.toml")
    }

    /// The URLs of an issuer's metadata, in the order tried: RFC 8414 §3.1's
    /// path-inserted well-known URL, then OpenID Connect discovery path-inserted and
    /// path-appended (the order the MCP authorization specification lists). For an issuer
    /// without a path, the two well-known URLs on its host.
    static func metadataURLs(issuer: String) throws(OAuthError) -> [String] {
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let oauth = try ResourceURL.inserting("/.well-known/oauth-authorization-server", into: trimmed, what: "the authorization server")
        let openID = try ResourceURL.inserting("/.well-known/openid-configuration", into: trimmed, what: "the authorization server")
        let hasPath = ResourceURL.split(trimmed).map { !$0.path.isEmpty } ?? false
        return hasPath ? [oauth, openID, trimmed + "/.well-known/openid-configuration"] : [oauth, openID]
    }

    /// The checks of RFC 9728 §3.3 and of authbroker on a decoded resource metadata document.
    static func check(_ metadata: ProtectedResourceMetadata, resource: String, place: String) throws(OAuthError) {
        guard metadata.resource == resource else {
            let named = EndpointPolicy.describe(metadata.resource)
            let asked = EndpointPolicy.describe(resource)
            let differ = named == asked ? " (they differ in the query)" : ""
            throw .configuration("\(place) is for the resource \(named), not \(asked) as asked\(differ); they must be identical (RFC 9728 §3.3), so authbroker does not use it")
        }
        guard !metadata.authorizationServers.isEmpty else {
            throw .configuration(ProtectedResourceMetadata.noAuthorizationServer(in: place))
        }
        for server in metadata.authorizationServers {
            do {
                try EndpointPolicy.checkIssuer(server, what: "the authorization server")
            } catch {
                throw .configuration("\(place) names an authorization server authbroker cannot use: \(error.message)")
            }
        }
    }

    /// The error a metadata answer other than 200 stands for: a redirect (never followed),
    /// "not now" (429, 503), or an answer that is no metadata.
    static func refusal(_ response: HTTPResponse, url: String, place: String) -> OAuthError {
        let status = response.status
        if (300..<400).contains(status) {
            guard var location = response.headers["location"], !location.isEmpty else {
                return .configuration("\(place) answered HTTP \(status), a redirect to nowhere; authbroker does not follow redirects for metadata")
            }
            if location.hasPrefix("/"), !location.hasPrefix("//"), let origin = ResourceURL.origin(of: url) { location = origin + location }
            return .configuration("\(place) redirected to \(EndpointPolicy.describe(location)); authbroker does not follow redirects for metadata, so the server must answer at that URL itself")
        }
        let said = "\(place) answered HTTP \(status)\(ProviderAnswer.statusHint(status))"
        if status == 429 || status == 503 { return .busy(said, retryAfter: RetryAfter(response: response)) }
        return .invalidResponse(said)
    }
}
