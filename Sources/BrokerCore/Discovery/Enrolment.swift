#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol
import OAuth

/// Makes a trusted authorization server a provider: reads its metadata (RFC 8414, OpenID
/// discovery as the fallback, issuer checked) and finds its client: a Client ID Metadata
/// Document where the server takes one and config.toml names one, else RFC 7591
/// registration as a native public client with the loopback port it will listen on. What
/// the server answers is what is used (RFC 7591 §3.2.1).
struct Enrolment: Sendable {
    let issuer: String
    let resource: ProtectedResourceMetadata
    let name: String
    let settings: DiscoverySettings
    let resources: ResourceDiscovery
    let registrar: ClientRegistrar
    let clock: WallClock

    static let deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

    func run() async throws(BrokerError) -> ProviderConfig {
        let server: ProviderMetadata
        try ProviderRequests.charge()
        do {
            server = try await resources.authorizationServerMetadata(issuer: issuer).value
        } catch {
            throw failed(error, doing: "reading its metadata")
        }
        let scopes = Self.scopes(server: server, resource: resource)
        var config: ProviderConfig
        if let document = settings.clientIDMetadataDocument, server.clientIDMetadataDocumentSupported == true {
            config = DiscoveredProviderItem.config(
                name: name, issuer: issuer, clientID: document, clientSecret: nil, resources: [resource.resource],
                scopes: scopes, redirectPort: nil,
                origin: DiscoveredOrigin(client: .metadataDocument, registeredAt: Int64(clock.now())))
        } else if let endpoint = server.registrationEndpoint {
            config = try await register(at: endpoint, server: server, scopes: scopes)
        } else {
            throw BrokerError.configuration(provider: name, message: "\(host) offers neither dynamic client registration (RFC 7591) nor Client ID Metadata Documents\(settings.clientIDMetadataDocument == nil ? "" : " (its metadata does not say client_id_metadata_document_supported)"): register a client for authbroker there and add it to config.toml as [providers.NAME] with issuer = \"\(issuer)\" and its client_id")
        }
        // The resource decides whether it takes DPoP-bound tokens (RFC 9728 §2).
        if resource.dpopBoundAccessTokensRequired == true || resource.dpopSigningAlgValuesSupported?.contains("ES256") == true,
           server.dpopSigningAlgValuesSupported?.contains("ES256") ?? true {
            config.dpop = .es256
        }
        return config
    }

    private var host: String { ResourceURL.host(of: issuer) ?? EndpointPolicy.describe(issuer) }

    /// RFC 7591: a native public client with a loopback redirect on the port its sign-ins
    /// will listen on (many servers match redirect URIs port and all), asking for the
    /// device grant too where the server has it, and again without it when refused.
    private func register(at endpoint: String, server: ProviderMetadata, scopes: [String]) async throws(BrokerError) -> ProviderConfig {
        let port = try Self.freeLoopbackPort()
        try ProviderRequests.charge()
        var grants = ["authorization_code", "refresh_token"]
        let device = server.deviceAuthorizationEndpoint != nil
        if device { grants.append(Self.deviceGrant) }
        var request = ClientRegistrationRequest(
            redirectURIs: ["http://127.0.0.1:\(port)/callback"], grantTypes: grants, scope: scopes.joined(separator: " "),
            clientName: "authbroker", softwareID: "org.authbroker", softwareVersion: BrokerVersion.current)
        let registration: ClientRegistration
        do {
            do {
                registration = try await registrar.register(request, at: endpoint)
            } catch .provider(let code, _, _) where device && (code == "invalid_client_metadata" || code == "invalid_request") {
                // Glewlwyd 2.7, for one, refuses the device grant's URN in grant_types.
                request.grantTypes.removeAll { $0 == Self.deviceGrant }
                registration = try await registrar.register(request, at: endpoint)
            }
        } catch {
            throw failed(error, doing: "registering authbroker as a client")
        }
        // The port the server registered, if it changed it.
        let registeredPort = registration.redirectURIs?.lazy.compactMap(Self.loopbackPort).first ?? port
        let secret = registration.tokenEndpointAuthMethod == "none" ? nil : registration.clientSecret
        let origin = DiscoveredOrigin(client: .registered, tokenEndpointAuthMethod: registration.tokenEndpointAuthMethod ?? (secret == nil ? "none" : nil),
                                      registrationAccessToken: registration.registrationAccessToken,
                                      registrationClientURI: registration.registrationClientURI, registeredAt: Int64(clock.now()))
        return DiscoveredProviderItem.config(
            name: name, issuer: issuer, clientID: registration.clientID, clientSecret: secret, resources: [resource.resource],
            scopes: registration.scope.map { Self.merged(scopes, $0) } ?? scopes, redirectPort: registeredPort, origin: origin)
    }

    /// The scopes a sign-in asks for: `openid` and `offline_access` where the server has
    /// them (or says nothing), and the resource's own.
    static func scopes(server: ProviderMetadata, resource: ProtectedResourceMetadata) -> [String] {
        var scopes = ["openid", "offline_access"].filter { server.scopesSupported?.contains($0) ?? true }
        for s in resource.scopesSupported ?? [] where !scopes.contains(s) { scopes.append(s) }
        return scopes
    }

    /// The scopes asked, narrowed to those the registration granted when it says so.
    static func merged(_ asked: [String], _ granted: String) -> [String] {
        let allowed = Set(granted.split(separator: " ").map(String.init))
        let kept = asked.filter(allowed.contains)
        return kept.isEmpty ? asked : kept
    }

    static func loopbackPort(_ uri: String) -> Int? {
        guard uri.hasPrefix("http://127.0.0.1:") else { return nil }
        let rest = uri.dropFirst("http://127.0.0.1:".count)
        return Int(rest.prefix(while: \.isNumber))
    }

    /// A port no program listens on now on 127.0.0.1, for the registered redirect URI.
    static func freeLoopbackPort() throws(BrokerError) -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BrokerError.internalError("no socket for the sign-in port: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { a -> Bool in
                bind(fd, a, length) == 0 && getsockname(fd, a, &length) == 0
            }
        }
        guard bound else { throw BrokerError.internalError("no free loopback port for the sign-in: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// An OAuth failure while enrolling, as one sentence naming the server and what it said.
    private func failed(_ error: OAuthError, doing what: String) -> BrokerError {
        switch error {
        case .unreachable(let m), .busy(let m, _):
            return .providerUnreachable(provider: name, retryAfter: 1, message: "\(host) could not be reached while \(what): \(m); try again")
        case .invalidResponse(let m), .endpointNotFound(let m):
            return .providerUnreachable(provider: name, retryAfter: 1, message: "\(host) answered nonsense while \(what): \(m); if it goes on, tell its administrators, or register a client there by hand and add it to config.toml")
        case .configuration(let m):
            return .configuration(provider: name, message: "\(host) cannot be used: \(m); tell its administrators, or configure its provider in config.toml by hand")
        case .provider(let code, let description, _):
            let said = description.map { "\(code): \($0)" } ?? code
            return .providerError(provider: name, oauthError: code, message: "\(host) answered \(what) with an error (\(said)): register a client for authbroker there by hand and add it to config.toml as [providers.NAME] with issuer = \"\(issuer)\"")
        }
    }
}
