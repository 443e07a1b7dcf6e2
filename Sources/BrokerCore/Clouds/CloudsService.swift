import BrokerProtocol
import Logging
import OAuth

/// The clouds service: what the clouds' own STS take or give for the account's tokens
/// (workload identity federation; docs/integrations.md). `aws.credentials`: temporary AWS
/// credentials from STS `AssumeRoleWithWebIdentity`, cached in memory until shortly before
/// they expire; `account.id_token`: the account's ID token, the subject token of Google
/// Cloud's executable-sourced credentials (and of any other STS).
///
/// Owns the AWS credentials (`AWSCredentialCache`): never written anywhere, never logged.
/// Depends on the tokens service (the access token for an audience, the account's ID token
/// renewed by a refresh), reached through the exchange service's `TokensForExchange`, and
/// the daemon's HTTP transport (STS URLs follow the providers'
/// rule, `EndpointPolicy`). Held by the exchange service, registered by the root.
public final class CloudsService: RegistersMethods, Sendable {
    /// The exchange service's reach into the tokens service and the accounts.
    private let tokens: TokensForExchange
    private let idTokens: AccountIDTokens
    private let transport: any HTTPTransport
    private let cache = AWSCredentialCache()
    private let clock: WallClock
    private let logger: Logger

    init(tokens: TokensForExchange, idTokens: AccountIDTokens, transport: any HTTPTransport, clock: WallClock, logger: Logger) {
        self.tokens = tokens
        self.idTokens = idTokens
        self.transport = transport
        self.clock = clock
        self.logger = logger
    }

    // MARK: aws.credentials

    /// Credentials for the role: from the cache while they have more than
    /// `AWSCredentialCache.margin` left, else from STS (one request for concurrent callers).
    public func awsCredentials(_ p: AWSCredentialsParams) async throws(BrokerError) -> AWSCredentialsResult {
        let audience = try AWSPlan.audience(p, settings: tokens.aws)
        let (provider, account) = try tokens.resolved(provider: p.provider, account: p.account, resource: audience)
        guard account.state == .ready else { throw BrokerError.signInAgain(provider.name, account.displayName) }
        let key = try AWSPlan.key(p, account: account, audience: audience, settings: tokens.aws)
        if let hit = cache.lookup(key, now: clock.now()) { return result(hit, key: key, account: account, cached: true) }
        let minted = await cache.shared(key) { await self.mint(key, provider: provider, account: account) }
        switch minted {
        case .success(let credentials): return result(credentials, key: key, account: account, cached: false)
        case .failure(let error): throw error
        }
    }

    /// The answer from the cache, without waiting: nil when STS must be asked (or the
    /// request fails), in which case the caller goes on to `awsCredentials(_:)`.
    public func cachedAWSCredentials(_ p: AWSCredentialsParams) -> AWSCredentialsResult? {
        let settings = tokens.aws
        // Not `try?`, which would fold the ID token's nil audience into a failure.
        guard case .success(let audience) = Result(catching: { () throws(BrokerError) in try AWSPlan.audience(p, settings: settings) }),
              case .found(_, let account) = tokens.resolve(provider: p.provider, account: p.account, resource: audience),
              account.state == .ready,
              let key = try? AWSPlan.key(p, account: account, audience: audience, settings: settings),
              let hit = cache.lookup(key, now: clock.now())
        else { return nil }
        return result(hit, key: key, account: account, cached: true)
    }

    /// One `AssumeRoleWithWebIdentity`, stored before it is answered.
    private func mint(_ key: AWSCredentialKey, provider: Provider, account: Account) async -> Result<AWSCredentials, BrokerError> {
        do throws(BrokerError) {
            if let hit = cache.lookup(key, now: clock.now()) { return .success(hit) }
            let token = try await webIdentityToken(key, provider: provider, account: account)
            try ProviderRequests.charge()
            let host = EndpointPolicy.describe(key.request.endpoint)
            let response: HTTPResponse
            do {
                response = try await transport.send(AWSSTS.httpRequest(key.request, webIdentityToken: token))
            } catch {
                throw BrokerError.providerUnreachable(provider: provider.name, retryAfter: 5, message: "AWS STS at \(host) cannot be reached (\(error.message)): check the STS endpoint (--sts-endpoint, [aws] sts_endpoint or the region), the network and https_proxy, then try again")
            }
            let refusal = AWSRefusal(provider: provider.name, accountName: account.displayName, subject: account.key.subject,
                                     issuer: provider.config.issuer, audience: key.audience ?? provider.config.clientID,
                                     sentIDToken: key.audience == nil, roleARN: key.request.roleARN, endpoint: key.request.endpoint)
            switch AWSSTS.read(response) {
            case .success(let credentials)?:
                cache.store(credentials, for: key, now: clock.now()) { self.tokens.account($0) != nil }
                logger.debug("assumed an AWS role", metadata: ["account": "\(account.key)", "role": "\(key.request.roleARN)",
                                                               "expires_at": "\(credentials.expiresAt)"])
                return .success(credentials)
            case .failure(let refused)?:
                logger.warning("AWS STS refused AssumeRoleWithWebIdentity", metadata: [
                    "account": "\(account.key)", "role": "\(key.request.roleARN)", "code": "\(refused.code)", "status": "\(refused.status)"])
                return .failure(AWSRefusal.isBusy(refused) ? refusal.busy(refused) : refusal.error(refused))
            case nil:
                logger.warning("AWS STS gave an answer that is not STS's", metadata: ["endpoint": "\(host)", "status": "\(response.status)"])
                throw BrokerError.providerUnreachable(provider: provider.name, retryAfter: 5, message: "\(host) answered HTTP \(response.status) with something that is not an STS answer: check that --sts-endpoint or [aws] sts_endpoint is an AWS STS endpoint")
            }
        } catch {
            return .failure(error)
        }
    }

    /// The token STS checks: the ID token, or the access token for the audience.
    private func webIdentityToken(_ key: AWSCredentialKey, provider: Provider, account: Account) async throws(BrokerError) -> String {
        guard let audience = key.audience else {
            return try await idTokens.live(of: account, provider: provider, minimumLife: 60,
                                           instead: "send an access token instead, for the audience the role's trust policy checks (--audience, or [aws] audience)")
        }
        return try await tokens.token(TokenGetParams(resource: audience, provider: provider.name, account: account.key.subject, minTTL: 60)).accessToken
    }

    private func result(_ c: AWSCredentials, key: AWSCredentialKey, account: Account, cached: Bool) -> AWSCredentialsResult {
        AWSCredentialsResult(accessKeyID: c.accessKeyID, secretAccessKey: c.secretAccessKey, sessionToken: c.sessionToken,
                             expiresAt: c.expiresAt, assumedRoleARN: c.assumedRoleARN, provider: key.account.provider,
                             account: account.displayName, cached: cached)
    }

    // MARK: account.id_token

    /// The account's ID token with at least `min_ttl` (and `refresh_margin`) left, renewed
    /// by a refresh first when it has less.
    public func idToken(_ p: IDTokenParams) async throws(BrokerError) -> IDTokenResult {
        try TokensService.checkMinTTL(p.minTTL)
        let (provider, account) = try tokens.resolved(provider: p.provider, account: p.account)
        guard account.state == .ready else { throw BrokerError.signInAgain(provider.name, account.displayName) }
        let token = try await idTokens.live(of: account, provider: provider, minimumLife: Double(p.minTTL ?? 0),
                                            instead: "use an access token instead (`authctl token`, or `authctl gcloud-credential --resource URL`)")
        return idResult(token, provider: provider.name, account: account)
    }

    /// The stored ID token when it lives long enough, without waiting.
    public func cachedIDToken(_ p: IDTokenParams) -> IDTokenResult? {
        guard p.minTTL.map(TokenGetParams.minTTLRange.contains) ?? true,
              case .found(let provider, let account) = tokens.resolve(provider: p.provider, account: p.account),
              account.state == .ready,
              let token = idTokens.stored(of: account, minimumLife: Double(p.minTTL ?? 0))
        else { return nil }
        return idResult(token, provider: provider.name, account: account)
    }

    private func idResult(_ token: String, provider: String, account: Account) -> IDTokenResult {
        // An ID token has an `exp` (OIDC Core §2); one that cannot be read is said to live a minute.
        let expiry = AccountIDTokens.expiry(token).map { Int64($0) } ?? Int64(clock.now()) + 60
        return IDTokenResult(idToken: token, expiresAt: expiry, provider: provider, account: account.displayName)
    }

    public func register(into registrar: inout some MethodRegistrar) {
        // Checked as token.get of the token sent on: whoever may have it could present it
        // to STS itself. The ID token is the provider's default audience's (nil).
        registrar.add(MethodSpec(
            .awsCredentials, empty: AWSCredentialsParams(),
            access: .checked("the token sent to STS: provider and audience (the ID token as the default audience)") { p in
                let audience = try? AWSPlan.audience(p, settings: self.tokens.aws)
                return .token(provider: p.provider, targets: [audience], scopes: [], params: [])
            },
            mints: true,
            answer: .nowOrLater(fast: { self.cachedAWSCredentials($0) },
                                slow: { p throws(BrokerError) in try await self.awsCredentials(p) })))
        registrar.add(MethodSpec(
            .accountIDToken, empty: IDTokenParams(),
            access: .checked("the ID token: provider, as a token for the default audience") { p in
                .token(provider: p.provider, targets: [nil], scopes: [], params: [])
            },
            mints: true,
            answer: .nowOrLater(fast: { self.cachedIDToken($0) },
                                slow: { p throws(BrokerError) in try await self.idToken(p) })))
    }
}
