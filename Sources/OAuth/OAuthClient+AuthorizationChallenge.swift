import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One answer of the authorization challenge endpoint (OAuth 2.0 for First-Party
/// Applications, draft-ietf-oauth-first-party-apps §5).
public enum AuthorizationChallengeResult: Sendable, Equatable {
    /// HTTP 200: the code to redeem at the token endpoint with the PKCE verifier.
    case code(String)
    /// HTTP 400 `insufficient_authorization`: the provider wants more from the user.
    /// `authSession` goes back with the next request. The draft leaves open how the
    /// provider says what it wants; authbroker reads `next` (`username`, `password` or
    /// `otp`, the draft's example parameter names) and shows `message` as the question.
    case needs(authSession: String?, next: String?, message: String?)
}

extension OAuthClient {
    /// Sends one authorization challenge request: client, scope, PKCE challenge and
    /// resources every time (the draft allows repeating them), the `auth_session` of the
    /// previous answer, and the user's `answer`. Errors other than
    /// `insufficient_authorization` (`invalid_session`, `access_denied`, `redirect_to_web`
    /// …) are thrown as `OAuthError.provider`. The answer is never put in a sentence.
    public func authorizationChallenge(_ metadata: ProviderMetadata, authSession: String?, pkce: PKCE,
                                       scopes: [String], resources: [String],
                                       answer: (name: String, value: String)) async throws(OAuthError) -> AuthorizationChallengeResult {
        guard let endpoint = metadata.authorizationChallengeEndpoint else {
            throw .configuration("provider \(EndpointPolicy.describe(metadata.issuer)) has no authorization challenge endpoint")
        }
        var parameters: [(String, String)] = [("code_challenge", pkce.challenge), ("code_challenge_method", PKCE.method)]
        if !scopes.isEmpty { parameters.append(("scope", scopes.joined(separator: " "))) }
        parameters += resources.map { (configuration.audienceParameter, $0) }
        if let authSession { parameters.append(("auth_session", authSession)) }
        parameters.append((answer.name, answer.value))
        let place = "authorization challenge endpoint"
        let response = try await postForm(parameters, to: endpoint, name: place,
                                          authMethods: metadata.tokenEndpointAuthMethodsSupported)
        // The user's answer is a credential unless it is the user name.
        let secrets = secrets(in: parameters) + (answer.name == "username" ? [] : [answer.value])
        let json = try? JSONDecoder().decode([String: JSONValue].self, from: Data(response.body))
        if response.status == 400, let json, json["error"]?.stringValue == "insufficient_authorization" {
            return .needs(authSession: json["auth_session"]?.stringValue,
                          next: json["next"]?.stringValue.map { ProviderAnswer.printable($0, limit: 32) },
                          message: json["message"]?.stringValue.map { ProviderAnswer.printable(ProviderAnswer.redacting($0, secrets), limit: 200) })
        }
        let object = try ProviderAnswer.object(response, place: place, sent: secrets)
        guard let code = object["authorization_code"]?.stringValue, !code.isEmpty else {
            throw .invalidResponse("the provider's \(place) answered without an authorization_code")
        }
        return .code(code)
    }
}
