import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Registers authbroker as a client at an authorization server (RFC 7591 dynamic client
/// registration). Holds no state; every call is one request.
public struct ClientRegistrar: Sendable {
    /// How requests travel; `NetworkTransport` in the daemon, a stub in tests.
    public let transport: any HTTPTransport

    /// Makes a registrar that sends through `transport`.
    public init(transport: any HTTPTransport) {
        self.transport = transport
    }

    /// POSTs `request` as JSON to `endpoint` (RFC 7591 §3.1), with `initialAccessToken` as
    /// a Bearer token when the server handed one out. Returns what the server registered
    /// (201, or 200, with a JSON object holding `client_id`). Throws `.configuration` for an
    /// endpoint `EndpointPolicy.check` refuses; `.provider` for a refusal (RFC 7591 §3.2.2
    /// `error`, or a bare 401/403), whose description names the endpoint; `.busy` for 429
    /// and 503; `.endpointNotFound` for 404; `.invalidResponse` for anything else.
    public func register(_ request: ClientRegistrationRequest, at endpoint: String,
                         initialAccessToken: String? = nil) async throws(OAuthError) -> ClientRegistration {
        try EndpointPolicy.check(endpoint, what: "the registration endpoint")
        var headers = ["Content-Type": "application/json", "Accept": "application/json"]
        if let initialAccessToken { headers["Authorization"] = "Bearer \(initialAccessToken)" }
        let body: [UInt8]
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            body = Array(try encoder.encode(request))
        } catch {
            throw .configuration("the registration request for \(EndpointPolicy.describe(endpoint)) could not be written as JSON")
        }
        let response = try await transport.send(HTTPRequest(method: "POST", url: endpoint, headers: headers, body: body))
        return try Self.registration(response, endpoint: endpoint, sent: initialAccessToken.map { [$0] } ?? [])
    }

    /// Reads the registration endpoint's answer. `sent` are the credentials the request
    /// carried, never shown even when the server quotes them back.
    static func registration(_ response: HTTPResponse, endpoint: String, sent: [String]) throws(OAuthError) -> ClientRegistration {
        let place = "the registration endpoint at \(EndpointPolicy.describe(endpoint))"
        let status = response.status
        if status == 429 || status == 503 {
            throw .busy("\(place) answered HTTP \(status)\(ProviderAnswer.statusHint(status))", retryAfter: RetryAfter(response: response))
        }
        if status == 404 { throw .endpointNotFound("\(place) answered HTTP 404 (not found)") }
        let json = try? JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        if let json, status < 500, let code = json["error"]?.stringValue, json["client_id"] == nil {
            let said = json["error_description"]?.stringValue
                .map { ProviderAnswer.printable(ProviderAnswer.redacting(String($0.prefix(1024)), sent), limit: 200) }
            throw .provider(oauthCode: ProviderAnswer.printable(ProviderAnswer.redacting(String(code.prefix(256)), sent), limit: 64),
                            description: "\(place) refused the registration" + (said.map { $0.isEmpty ? "" : ": \($0)" } ?? ""),
                            httpStatus: status)
        }
        if status == 401, json == nil {
            let why = sent.isEmpty ? "takes only clients registered with an initial access token" : "refused the initial access token"
            throw .provider(oauthCode: "invalid_token", description: "\(place) \(why) (HTTP 401)", httpStatus: 401)
        }
        if status == 403, json == nil {
            throw .provider(oauthCode: "access_denied", description: "\(place) refused the registration (HTTP 403)", httpStatus: 403)
        }
        guard status == 200 || status == 201 else {
            throw .invalidResponse("\(place) answered HTTP \(status)\(ProviderAnswer.statusHint(status))")
        }
        let registration = try ClientRegistration.decoded(from: response.body, place: "\(place) answered")
        guard !registration.clientID.isEmpty else {
            throw .invalidResponse("\(place) answered a registration with an empty client_id (RFC 7591 §3.2.1)")
        }
        return registration
    }
}
