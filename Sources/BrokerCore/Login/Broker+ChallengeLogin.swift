import OAuth
import BrokerProtocol

/// The terminal sign-in through the provider's authorization challenge endpoint (OAuth 2.0
/// for First-Party Applications draft): each answer goes to the endpoint until it gives an
/// authorization code, which is redeemed with the PKCE verifier like a browser sign-in's.
/// Answers are sent once and kept nowhere.
extension Broker {
    /// The most questions one sign-in may ask; a provider asking more is stuck in a loop.
    static let challengeRounds = 10

    func challengeSignIn(_ provider: Provider, metadata: ProviderMetadata, conversation: Conversation,
                         resource: String?) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        let pkce = PKCE()
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let client = provider.client(signer, metadata: metadata, clock: clock)
        var authSession: String?
        var wanted = "username"
        var message: String?
        for _ in 0..<Self.challengeRounds {
            let prompt = try challengePrompt(wanted, message: message, provider: name)
            // The draft's answers go out as form pairs of Strings: not wiped (docs/security.md).
            let value = try await ask(conversation, prompt, provider: provider).text
            let result: AuthorizationChallengeResult
            do {
                result = try await client.authorizationChallenge(
                    metadata, authSession: authSession, pkce: pkce, scopes: provider.config.scopes,
                    resources: resource.map { [$0] } ?? provider.config.resources, answer: (wanted, value))
            } catch {
                counters.providerErrors.increment()
                throw await challengeFailure(error, asked: prompt, provider: provider)
            }
            switch result {
            case .needs(let session, let next, let text):
                authSession = session ?? authSession
                // Without a hint, the draft's own example: user name, then password.
                wanted = next ?? (wanted == "username" ? "password" : wanted)
                message = text
            case .code(let code):
                logger.info("authorization challenge answered with a code", metadata: ["provider": "\(name)"])
                let tokens: TokenResponse
                do {
                    tokens = try await client.exchangeCode(metadata, code: code, redirectURI: nil,
                                                           codeVerifier: pkce.verifier, resource: nil)
                } catch {
                    counters.providerErrors.increment()
                    if case .provider(let oauthCode, _, _) = error {
                        throw BrokerError.loginFailed(provider: name, message: "\(name) would not redeem the authorization code of the sign-in (\(oauthCode)): run `authctl login --terminal --provider \(name)` again")
                    }
                    throw await provider.failedSignIn(error)
                }
                return try await completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
            }
        }
        throw BrokerError.loginFailed(provider: name, message: "\(name) asked more than \(Self.challengeRounds) questions without finishing the sign-in: sign in with the browser (`authctl login --provider \(name)`)")
    }

    /// The question for what the provider wants: `username`, `password` or `otp`.
    private func challengePrompt(_ wanted: String, message: String?, provider name: String) throws(BrokerError) -> LoginPrompt {
        let label = message.flatMap { $0.isEmpty ? nil : $0 }
        switch wanted {
        case "username": return LoginPrompt(kind: .text, label: label ?? "User name at \(name)", name: wanted)
        case "password": return LoginPrompt(kind: .secret, label: label ?? "Password", name: wanted)
        case "otp": return LoginPrompt(kind: .otp, label: label ?? "One-time code", name: wanted)
        default:
            throw BrokerError.loginFailed(provider: name, message: "\(name) asks for \(wanted), which `authctl login --terminal` cannot ask: sign in with the browser (`authctl login --provider \(name)`)")
        }
    }

    /// One sentence for an error of the authorization challenge endpoint.
    private func challengeFailure(_ error: OAuthError, asked prompt: LoginPrompt, provider: Provider) async -> BrokerError {
        let name = provider.name
        let again = "run `authctl login --terminal --provider \(name)` again"
        let what = prompt.name == "otp" ? "the code" : prompt.name == "password" ? "the password" : "the user name"
        switch error {
        case .provider("access_denied", _, _), .provider("invalid_grant", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) refused the sign-in after \(what) was given: check it and \(again)")
        case .provider("invalid_session", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) no longer knows this sign-in (invalid_session): \(again)")
        case .provider("redirect_to_web", _, _):
            return BrokerError.loginFailed(provider: name, message: "\(name) wants this sign-in finished in a browser: use `authctl login --provider \(name)`")
        default:
            return await provider.failedSignIn(error)
        }
    }
}
