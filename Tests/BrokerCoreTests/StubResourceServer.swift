@testable import BrokerCore
import Foundation
import OAuth
import Synchronization

/// A STUB protected resource and its authorization server behind the broker's
/// `HTTPTransport`, in memory: the resource's metadata (RFC 9728) at its well-known URL, the
/// server's metadata (RFC 8414, or OpenID discovery only), its registration endpoint
/// (RFC 7591) answering from a script, and a token endpoint. A stub is used because no real
/// server produces these cases on demand: metadata for another resource, a server that
/// names another issuer (mix-up), a registration refused, answered with garbage, or with a
/// secret nobody asked for, a refusal of the device grant's URN alone. It records every
/// request, so a test can say what was sent to whom, and nothing else.
final class StubResourceServer: HTTPTransport {
    static let resource = "https://mcp.example/mcp"
    static let resourceMetadataURL = "https://mcp.example/.well-known/oauth-protected-resource/mcp"
    static let issuer = "https://as.example"
    static let oauthMetadataURL = "https://as.example/.well-known/oauth-authorization-server"
    static let openIDMetadataURL = "https://as.example/.well-known/openid-configuration"
    static let registrationURL = "https://as.example/register"
    static let tokenURL = "https://as.example/token"

    /// How the authorization server publishes its metadata.
    enum Publishing: Sendable {
        /// RFC 8414 only (OpenID discovery answers 404).
        case oauth
        /// OpenID discovery only (RFC 8414 answers 404).
        case openID
    }

    /// What the registration endpoint answers.
    enum Registration: Sendable {
        /// 201 with this client_id, and optionally a secret and an auth method.
        case registered(clientID: String, secret: String? = nil, authMethod: String? = nil)
        /// 400 with this OAuth error and description (RFC 7591 §3.2.2).
        case refused(String, String)
        /// This status and body, as they are.
        case raw(Int, String)
    }

    private struct State {
        /// The resource the metadata names, and the servers it names.
        var resourceNamed = StubResourceServer.resource
        var authorizationServers = [StubResourceServer.issuer]
        var publishing = Publishing.oauth
        /// The issuer the server's metadata names (another one: a mix-up).
        var issuerNamed = StubResourceServer.issuer
        /// Further members of the server's metadata, as JSON text starting with a comma.
        var metadataExtra = ""
        var script: [Registration] = []
        var standing = Registration.registered(clientID: "client-1")
        var registrationDelay = Duration.zero
        var requests: [String] = []
        var registrations: [[UInt8]] = []
        var tokenRequests: [(form: [String: String], authorization: String?)] = []
        var issued = 0
    }

    private let state = Mutex(State())
    /// The authorization server's issuer: `https://as.example`, or one with a path on that
    /// host, whose metadata is at the path-inserted well-known URLs (RFC 8414 §3.1).
    let issuer: String

    init(issuer: String = StubResourceServer.issuer) {
        self.issuer = issuer
        state.withLock { s in
            s.authorizationServers = [issuer]
            s.issuerNamed = issuer
        }
    }

    private var path: String { String(issuer.dropFirst(Self.issuer.count)) }
    var oauthMetadataURL: String { Self.oauthMetadataURL + path }
    var openIDMetadataURL: String { Self.openIDMetadataURL + path }

    /// The resource its metadata names (`resource` member).
    func nameResource(_ resource: String) { state.withLock { $0.resourceNamed = resource } }
    /// The authorization servers the resource's metadata names.
    func nameServers(_ servers: [String]) { state.withLock { $0.authorizationServers = servers } }
    func publish(_ how: Publishing) { state.withLock { $0.publishing = how } }
    /// The issuer the server's own metadata names.
    func nameIssuer(_ issuer: String) { state.withLock { $0.issuerNamed = issuer } }
    func addMetadata(_ extra: String) { state.withLock { $0.metadataExtra += extra } }
    /// Answers for the next registrations, in order; then `answerAlways`'s.
    func script(_ answers: Registration...) { state.withLock { $0.script += answers } }
    func answerAlways(_ answer: Registration) { state.withLock { $0.standing = answer } }
    /// Each registration takes this long, so that two of them would overlap.
    func slowRegistrations(_ delay: Duration) { state.withLock { $0.registrationDelay = delay } }

    /// "METHOD URL" of every request, in order.
    var requests: [String] { state.withLock { $0.requests } }
    /// The hosts the requests went to.
    var hosts: Set<String> { Set(requests.compactMap { ResourceURL.host(of: String($0.split(separator: " ")[1])) }) }
    /// The JSON object of each registration request, in order.
    var registrations: [[String: Any]] {
        state.withLock { $0.registrations }.map { (try? JSONSerialization.jsonObject(with: Data($0))) as? [String: Any] ?? [:] }
    }
    var tokenRequests: [(form: [String: String], authorization: String?)] { state.withLock { $0.tokenRequests } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let (resourceNamed, servers, publishing, issuerNamed, extra) = state.withLock { s in
            s.requests.append("\(request.method) \(request.url)")
            return (s.resourceNamed, s.authorizationServers, s.publishing, s.issuerNamed, s.metadataExtra)
        }
        switch (request.method, request.url) {
        case ("GET", Self.resourceMetadataURL):
            let servers = servers.map { "\"\($0)\"" }.joined(separator: ",")
            return Self.json(200, #"{"resource":"\#(resourceNamed)","authorization_servers":[\#(servers)]}"#)
        case ("GET", oauthMetadataURL) where publishing == .oauth, ("GET", openIDMetadataURL) where publishing == .openID:
            let base = Self.issuer
            return Self.json(200, #"{"issuer":"\#(issuerNamed)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(Self.tokenURL)","registration_endpoint":"\#(Self.registrationURL)","response_types_supported":["code"]\#(extra)}"#)
        case ("POST", Self.registrationURL):
            let raw = request.body ?? []
            let body = (try? JSONSerialization.jsonObject(with: Data(raw))) as? [String: Any] ?? [:]
            let (answer, delay) = state.withLock { s in
                s.registrations.append(raw)
                return (s.script.isEmpty ? s.standing : s.script.removeFirst(), s.registrationDelay)
            }
            if delay > .zero { try? await Task.sleep(for: delay) }
            switch answer {
            case .registered(let clientID, let secret, let method):
                var members = [#""client_id":"\#(clientID)""#]
                if let secret { members.append(#""client_secret":"\#(secret)","client_secret_expires_at":0"#) }
                if let method { members.append(#""token_endpoint_auth_method":"\#(method)""#) }
                if let uris = body["redirect_uris"] as? [String] {
                    members.append(#""redirect_uris":[\#(uris.map { "\"\($0)\"" }.joined(separator: ","))]"#)
                }
                return Self.json(201, "{" + members.joined(separator: ",") + "}")
            case .refused(let code, let description):
                return Self.json(400, #"{"error":"\#(code)","error_description":"\#(description)"}"#)
            case .raw(let status, let text):
                return HTTPResponse(status: status, headers: ["Content-Type": "text/html"], body: Array(text.utf8))
            }
        case ("POST", Self.tokenURL):
            let form = Self.form(request.body ?? [])
            let n = state.withLock { s in
                s.tokenRequests.append((form, request.headers["Authorization"] ?? request.headers["authorization"]))
                s.issued += 1
                return s.issued
            }
            return Self.json(200, #"{"access_token":"as-access-\#(n)","token_type":"Bearer","expires_in":3600}"#)
        default:
            return HTTPResponse(status: 404)
        }
    }

    private static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }

    /// The form pairs of a token request, percent-decoded.
    private static func form(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
            form[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return form
    }
}
