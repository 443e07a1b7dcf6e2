import OAuth

/// One configured provider at run time: its OAuth client, its discovery document (fetched
/// once, on first use, so the daemon starts even when the provider is down) and the
/// back-off that spares a provider that is not answering.
actor Provider {
    nonisolated let config: ProviderConfig
    nonisolated let client: OAuthClient
    private let clock: WallClock
    private var metadata: ProviderMetadata?
    private var discovery: Task<ProviderMetadata, any Error>?
    private var failures = 0
    private var retryAt: Double = 0

    init(config: ProviderConfig, transport: any HTTPTransport, clock: WallClock) {
        self.config = config
        self.clock = clock
        self.client = OAuthClient(
            configuration: ClientConfiguration(
                issuer: config.issuer, clientID: config.clientID,
                clientSecret: config.clientSecret, audienceParameter: config.audienceParameter),
            transport: transport)
    }

    nonisolated var name: String { config.name }

    /// The discovery document; concurrent first callers share one fetch.
    func discovered() async throws(BrokerError) -> ProviderMetadata {
        if let metadata { return metadata }
        try checkBackoff()
        let task: Task<ProviderMetadata, any Error>
        if let discovery {
            task = discovery
        } else {
            let client = self.client
            task = Task { try await client.discover() }
            discovery = task
        }
        let result = await task.result
        discovery = nil
        switch result {
        case .success(let m):
            metadata = m
            succeeded()
            return m
        case .failure(let error as OAuthError):
            throw failed(error, doing: "discovery")
        case .failure:
            throw BrokerError.internalError("discovery of \(config.name) failed unexpectedly")
        }
    }

    /// Refuses at once while a provider that stopped answering is being given time.
    func checkBackoff() throws(BrokerError) {
        let now = clock.now()
        if now < retryAt {
            let wait = Int((retryAt - now).rounded(.up))
            throw BrokerError.providerUnreachable(
                provider: config.name, retryAfter: wait,
                message: "\(config.name) did not answer recently; authbroker retries in \(wait) s")
        }
    }

    func succeeded() {
        failures = 0
        retryAt = 0
    }

    /// Turns an OAuth failure into the broker's error and, for an unreachable provider,
    /// starts or lengthens the back-off (1, 2, 4 … 30 s).
    func failed(_ error: OAuthError, doing what: String) -> BrokerError {
        let name = config.name
        switch error {
        case .unreachable(let m), .invalidResponse(let m):
            failures += 1
            let delay = min(30, 1 << min(failures - 1, 5))
            retryAt = clock.now() + Double(delay)
            return .providerUnreachable(provider: name, retryAfter: delay, message: "\(name): \(m); try again in \(delay) s")
        case .configuration(let m):
            return .providerError(provider: name, oauthError: "configuration", message: "\(name): \(m)")
        case .provider(let code, _, _):
            return .providerError(provider: name, oauthError: code, message: "\(name) refused the \(what): \(error.message)")
        }
    }
}
