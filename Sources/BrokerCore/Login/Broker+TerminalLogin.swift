import BrokerCrypto
import BrokerProtocol
import OAuth

/// The terminal sign-in (`authctl login --terminal`): the daemon drives the protocol and
/// asks its questions through `login.wait`; `login.answer` brings the user's answers.
/// Answers are used for the one request they are for and kept nowhere.
extension Broker {
    func startTerminalLogin(_ provider: Provider, _ params: LoginStartParams) async throws(BrokerError) -> LoginStartResult {
        let timeout = params.timeout ?? config.daemon.loginTimeout
        guard (1...3600).contains(timeout) else {
            throw BrokerError.invalidRequest(message: "timeout must be between 1 and 3600 seconds")
        }
        let metadata = try await provider.discovered()
        // The first-party apps draft when the provider offers it, else the password grant.
        let challenge = metadata.authorizationChallengeEndpoint != nil
        guard challenge || provider.config.passwordGrant else {
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) offers no sign-in in the terminal: set authorization_challenge_endpoint, or password_grant = true if it allows the password grant, under [providers.\(provider.name)] in config.toml (docs/sign-in.md), or sign in with `authctl login --device`")
        }
        let started = clock.now()
        let deadline = started + Double(timeout)
        let id = SecureRandom.token(bytes: 16)
        let conversation = Conversation()
        let resource = params.resource
        let task = Task<AccountInfo, any Error> {
            defer { conversation.finish() }
            if challenge {
                return try await self.challengeSignIn(provider, metadata: metadata, conversation: conversation, resource: resource)
            }
            return try await self.passwordSignIn(provider, metadata: metadata, conversation: conversation, resource: resource)
        }
        let session = LoginSession(id: id, provider: provider.name, expiresAt: deadline, task: task, conversation: conversation)
        do {
            try logins.add(session, now: started)
        } catch {
            task.cancel()
            throw error
        }
        Task {
            try? await Task.sleep(for: .seconds(timeout))
            session.cancel(because: "the sign-in to \(provider.name) was not finished within \(timeout) s: run `authctl login --terminal --provider \(provider.name)` again")
        }
        logger.info("terminal sign-in started", metadata: ["provider": "\(provider.name)", "login_id": "\(id)"])
        return LoginStartResult(loginID: id, provider: provider.name, flow: .terminal, expiresAt: Int64(deadline))
    }

    /// `login.answer`: the user's answer to the question the sign-in waits on. The answer
    /// comes in a `SecretBytes` (the server reads it from the request's bytes): a password
    /// typed here is wiped from memory once the request it is for is sent.
    public func answerLogin(loginID: String, value: SecretBytes) throws(BrokerError) -> LoginAnswerResult {
        guard let session = logins.find(id: loginID, provider: nil), let conversation = session.conversation else {
            throw BrokerError.loginFailed(provider: nil, message: "no terminal sign-in in progress with that id: start one with `authctl login --terminal`")
        }
        guard value.count <= 4096 else {
            throw BrokerError.invalidRequest(message: "an answer may be up to 4096 bytes long")
        }
        guard conversation.answer(value) else {
            throw BrokerError.invalidRequest(message: "the sign-in to \(session.provider) is not waiting for an answer: call login.wait for its question first")
        }
        return LoginAnswerResult(accepted: true)
    }

    /// Asks, or ends the sign-in when it was cancelled while the question was open.
    func ask(_ conversation: Conversation, _ prompt: LoginPrompt, provider: Provider) async throws(BrokerError) -> SecretBytes {
        guard let answer = await conversation.ask(prompt) else { throw BrokerError.signInCancelled(provider.name) }
        return answer
    }

    /// The resource owner password grant (RFC 6749 §4.3): user name and password, sent once
    /// to the token endpoint.
    private func passwordSignIn(_ provider: Provider, metadata: ProviderMetadata, conversation: Conversation,
                                resource: String?) async throws(BrokerError) -> AccountInfo {
        let name = provider.name
        let username = try await ask(conversation, LoginPrompt(kind: .text, label: "User name at \(name)", name: "username"), provider: provider).text
        let password = try await ask(conversation, LoginPrompt(kind: .secret, label: "Password", name: "password"), provider: provider)
        let signer = try provider.newDPoPSigner(metadata: metadata)
        let client = provider.client(signer, metadata: metadata, clock: clock)
        let tokens: TokenResponse
        do {
            tokens = try await client.password(
                metadata, username: username, password: password, scopes: provider.config.scopes,
                resources: resource.map { [$0] } ?? provider.config.resources)
        } catch {
            counters.providerErrors.increment()
            switch error {
            case .provider("invalid_grant", _, _), .provider("unauthorized_client", _, _), .provider("access_denied", _, _):
                // Glewlwyd answers a wrong password with a bare 403, and a client without the
                // grant with a bare 400: the two cannot be told apart, so the sentence names both.
                throw BrokerError.loginFailed(provider: name, message: "\(name) refused the sign-in: the user name or password is wrong, or client \(provider.config.clientID) may not use the password grant there; check both and run `authctl login --terminal --provider \(name)` again")
            case .provider("unsupported_grant_type", _, _):
                throw BrokerError.configuration(provider: name, message: "\(name) does not offer the password grant: set password_grant = false under [providers.\(name)] in config.toml and sign in with `authctl login --device`")
            default:
                throw await provider.failedSignIn(error)
            }
        }
        logger.info("password grant answered", metadata: ["provider": "\(name)"])
        return try await completeLogin(tokens, provider: provider, metadata: metadata, nonce: nil, dpop: signer, resource: resource)
    }
}
