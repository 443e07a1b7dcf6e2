import BrokerProtocol
import Logging
import OAuth

/// The exchange service: `token.exchange` (RFC 8693), a token for a downstream service
/// minted from the account's access token (or ID token) and cached under its own key.
///
/// Owns no state of its own: its tokens go into the tokens service's cache under keys
/// with an exchange target. Reaches the tokens service (the subject token, the cache, how
/// answers look), its refresher (the account's queue, its DPoP key) and the accounts only
/// through `TokensForExchange`, which the composition root builds.
///
/// Holds the clouds service too (`clouds`, which the composition root registers): the other
/// exchanges of the account's tokens, at the clouds' own STS instead of the provider.
public final class ExchangeService: RegistersMethods, Sendable {
    private let tokens: TokensForExchange
    private let logger: Logger
    private let clock: WallClock
    private let idTokens: AccountIDTokens
    /// AWS credentials and the ID token for the clouds' STS (Clouds/).
    public let clouds: CloudsService

    init(tokens: TokensForExchange, transport: any HTTPTransport, clock: WallClock, logger: Logger) {
        self.tokens = tokens
        self.clock = clock
        self.logger = logger
        self.idTokens = AccountIDTokens(tokens: tokens, clock: clock)
        self.clouds = CloudsService(tokens: tokens, idTokens: idTokens, transport: transport, clock: clock, logger: logger)
    }

    /// A token for a downstream service (RFC 8693), minted at the provider's token endpoint
    /// from the account's access token (or ID token), and cached under its own key.
    public func exchangeToken(_ request: TokenExchangeParams) async throws(BrokerError) -> TokenGetResult {
        let target = try Self.exchangeTarget(request)
        try TokensService.checkMinTTL(request.minTTL)
        let (provider, account) = try tokens.resolved(provider: request.provider, account: request.account)
        guard account.state == .ready else { throw BrokerError.signInAgain(provider.name, account.displayName) }
        // As for token.get: each new resource costs a request to the provider.
        guard provider.config.serves(resource: request.resource) else {
            throw BrokerError.invalidRequest(message: "resource is not one of the resources of [providers.\(provider.name)] in config.toml: add it there, or set any_resource = true there")
        }
        try provider.checkCallerChoices(scopes: request.scopes, params: nil)
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], exchange: target)
        let minimumLife = tokens.minimumLife(request.minTTL)
        let now = clock.reading()
        if let token = tokens.lookup(key, now: now, minimumLife: minimumLife) {
            tokens.countCacheHit()
            return tokens.result(token, key: key, account: account, at: now)
        }
        // Got before the account's queue is entered: a refresh of the subject token runs
        // in that queue itself.
        let subjectToken: String
        if target.subjectTokenType == OAuthClient.tokenTypeURN("id_token") {
            subjectToken = try await idTokens.live(of: account, provider: provider,
                                                   instead: "exchange its access token instead (subject_token_type access_token)")
        } else {
            subjectToken = try await tokens.token(TokenGetParams(provider: provider.name, account: account.key.subject)).accessToken
        }
        let token = try await tokens.inTurn(key, provider: provider) { () async throws(BrokerError) -> CachedToken in
            if let token = self.tokens.lookup(key, now: self.clock.reading(), minimumLife: minimumLife) { return token }
            try self.tokens.checkRoom(for: key, provider: provider, account: account)
            return try await self.exchange(subjectToken, key: key, target: target, provider: provider)
        }
        // Not in the cache when asked: exchanged for this request (or by the one it joined).
        AuditNote.note(.exchanged)
        let served = clock.reading()
        try TokensService.checkLife(token, minTTL: request.minTTL, now: served, provider: provider.name)
        return tokens.result(token, key: key, account: account, at: served)
    }

    /// The answer from the cache, without waiting: nil when the provider must be asked (or
    /// the request fails), in which case the caller goes on to `exchangeToken(_:)`. A hit
    /// is not a cache miss the connection's `cache_misses_per_minute` counts.
    public func cachedExchange(_ request: TokenExchangeParams) -> TokenGetResult? {
        guard let target = try? Self.exchangeTarget(request),
              request.minTTL.map(TokenGetParams.minTTLRange.contains) ?? true,
              case .found(let provider, let account) = tokens.resolve(provider: request.provider, account: request.account),
              provider.config.serves(resource: request.resource),
              provider.config.allows(scopes: request.scopes ?? []),
              account.state == .ready
        else { return nil }
        let key = CacheKey(account: account.key, resource: request.resource, scopes: request.scopes ?? [], exchange: target)
        let margin = tokens.refreshMargin
        let now = clock.reading()
        guard let token = tokens.lookup(key, now: now, minimumLife: Double(max(margin, request.minTTL ?? 0))) else { return nil }
        tokens.countCacheHit()
        return tokens.result(token, key: key, account: account, at: now)
    }

    /// One exchange at the provider, with a DPoP proof when the provider uses DPoP.
    private func exchange(_ subjectToken: String, key: CacheKey, target: ExchangeTarget,
                          provider: Provider) async throws(BrokerError) -> CachedToken {
        guard var account = tokens.account(key.account) else { throw BrokerError.notSignedIn(provider.name) }
        let metadata = try await provider.discovered()
        if provider.config.dpop != nil { try provider.checkOffersDPoP(metadata) }
        try await provider.checkBackoff()
        try ProviderRequests.charge()
        account = try await tokens.withDPoPKey(account, provider: provider, metadata: metadata)
        let client = provider.client(provider.signer(of: account), metadata: metadata, clock: clock)
        let sent = clock.reading()
        let response: TokenResponse
        do {
            response = try await client.exchangeToken(
                metadata, subjectToken: subjectToken, subjectTokenType: target.subjectTokenType,
                requestedTokenType: target.requestedTokenType, audience: target.audience,
                resource: key.resource, scopes: key.scopes)
        } catch {
            tokens.countProviderError()
            if case .provider("unsupported_grant_type", _, _) = error {
                await provider.succeeded()
                throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) does not offer token exchange (RFC 8693) to this client: ask its administrator to allow the grant \(OAuthClient.tokenExchangeGrant), or use `authctl token` for a token of the account itself")
            }
            let failure = await provider.failed(error, doing: "token exchange")
            logger.warning("token exchange failed", metadata: ["account": "\(account.key)", "error": "\(failure.message)"])
            throw failure
        }
        await provider.succeeded()
        let received = clock.reading()
        let token = CachedToken(
            accessToken: response.accessToken, tokenType: response.tokenType,
            expiry: CachedToken.expiry(sent: sent, received: received, expiresIn: response.expiresIn,
                                       exp: CachedToken.jwtExpiry(response.accessToken)),
            scope: CachedToken.scope(answered: response.scope, asked: key.scopes))
        tokens.store(token, for: key, now: received)
        logger.debug("exchanged", metadata: ["account": "\(account.key)", "audience": "\(target.audience ?? "-")", "resource": "\(key.resource ?? "-")"])
        return token
    }

    /// The checked target of a request, with token types as URNs.
    static func exchangeTarget(_ request: TokenExchangeParams) throws(BrokerError) -> ExchangeTarget {
        guard request.audience?.isEmpty == false || request.resource?.isEmpty == false else {
            throw BrokerError.invalidRequest(message: "token.exchange needs an audience or a resource: the service the new token is for")
        }
        let values = [request.audience, request.resource, request.requestedTokenType, request.subjectTokenType].compactMap { $0 }
        guard values.allSatisfy({ $0.utf8.count <= 2048 }), (request.scopes ?? []).count <= 64 else {
            throw BrokerError.invalidRequest(message: "token.exchange values may be up to 2048 bytes long, with up to 64 scopes")
        }
        let subject = request.subjectTokenType ?? "access_token"
        guard let subjectType = OAuthClient.tokenTypeURN(subject),
              [OAuthClient.tokenTypeURN("access_token"), OAuthClient.tokenTypeURN("id_token")].contains(subjectType)
        else {
            throw BrokerError.invalidRequest(message: "subject_token_type must be access_token or id_token")
        }
        var requested: String?
        if let name = request.requestedTokenType {
            guard let urn = OAuthClient.tokenTypeURN(name) else {
                throw BrokerError.invalidRequest(message: "requested_token_type must be access_token, id_token, jwt or a token type URN")
            }
            requested = urn
        }
        return ExchangeTarget(audience: request.audience, subjectTokenType: subjectType, requestedTokenType: requested)
    }

    public func register(into registrar: inout some MethodRegistrar) {
        // The resource (RFC 8707) and the audience (RFC 8693 §2.1) both name what the new
        // token is for: Keycloak, Okta and Auth0 mint it for the audience, others for the
        // resource, so one rule must grant both.
        registrar.add(MethodSpec(
            .tokenExchange, empty: TokenExchangeParams(),
            access: .checked("the new token: provider, resource and audience (one rule must grant both), scopes") { p in
                let targets = [p.resource, p.audience].compactMap { $0 }
                return .token(provider: p.provider, targets: targets.isEmpty ? [nil] : targets, scopes: p.scopes ?? [], params: [])
            },
            mints: true,
            audit: { p, r in
                AuditSubject(method: .tokenExchange, provider: r?.provider ?? p.provider, account: r?.account ?? p.account,
                             resource: p.resource, audience: p.audience)
            },
            answer: .nowOrLater(fast: { self.cachedExchange($0) },
                                slow: { p throws(BrokerError) in try await self.exchangeToken(p) })))
    }
}
