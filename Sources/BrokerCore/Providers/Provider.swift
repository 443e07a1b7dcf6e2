import BrokerProtocol
import OAuth

/// One configured provider at run time: its OAuth client, its discovery document (fetched
/// on first use, so the daemon starts even when the provider is down, and again once it
/// is a day old or an endpoint it names answers 404) and the back-off that spares a
/// provider that is not answering.
actor Provider {
    /// How long a discovery document is trusted before it is read again.
    static let discoveryMaxAge: Double = 86_400

    nonisolated let config: ProviderConfig
    nonisolated let client: OAuthClient
    /// The last `DPoP-Nonce` the provider gave, for the next proof (RFC 9449 §8).
    nonisolated let dpopNonces = DPoPNonces()
    /// Requests served from the cache while the provider cannot be reached.
    nonisolated let outage = OutageTally()
    private let clock: WallClock
    /// Told when the provider stops answering and when it answers again.
    private let events: EventHub
    /// The discovery document and when it was read (boot time).
    private var document: (metadata: ProviderMetadata, fetchedAt: Double)?
    private var discovery: Task<ProviderMetadata, any Error>?
    private var failures = 0
    /// When the back-off ends, on boot time (`WallClock.boottime`), and whether it began
    /// because the provider could not be reached (`networkChanged` ends such a one).
    private var backoff: (until: Double, unreachable: Bool) = (0, false)
    /// An endpoint answered 404 and the document has been read again since: another 404
    /// is backed off like any broken answer instead of reading the document once more.
    private var notFoundAfterRereading = false

    init(config: ProviderConfig, transport: any HTTPTransport, clock: WallClock, events: EventHub = EventHub()) {
        self.config = config
        self.events = events
        self.clock = clock
        self.isDiscovered = config.discovered != nil
        self.client = OAuthClient(
            configuration: ClientConfiguration(
                issuer: config.issuer, clientID: config.clientID,
                clientSecret: config.clientSecret, audienceParameter: config.audienceParameter),
            transport: transport)
    }

    nonisolated var name: String { config.name }
    /// Found by resource-first discovery rather than configured (read on cache hits).
    nonisolated let isDiscovered: Bool

    /// Whether callers may ask this provider for a token of `resource`, `scopes` and extra
    /// parameters of these names (`ProviderConfig`'s checks). Asked here, on the provider,
    /// for the cache hit's sake: read through `provider.config` from outside, the whole
    /// configuration was copied (and released) on every request.
    nonisolated func grants(resource: String?, scopes: [String], paramNames: Dictionary<String, String>.Keys?) -> Bool {
        config.serves(resource: resource) && config.allows(scopes: scopes) && (paramNames.map { config.allows(paramNames: $0) } ?? true)
    }

    /// The discovery document with the endpoints set in config.toml put in; concurrent
    /// first callers share one fetch.
    func discovered() async throws(BrokerError) -> ProviderMetadata {
        if let document, clock.boottime() - document.fetchedAt < Self.discoveryMaxAge { return document.metadata }
        try checkBackoff()
        let task: Task<ProviderMetadata, any Error>
        if let discovery {
            task = discovery
        } else {
            let client = self.client
            // A server found from a resource's metadata may publish RFC 8414 metadata only.
            task = isDiscovered ? Task { try await client.discoverAuthorizationServer() } : Task { try await client.discover() }
            discovery = task
        }
        let result = await task.result
        discovery = nil
        switch result {
        case .success(let m):
            var merged = config.endpoints.applied(to: m)
            // RFC 7591 §3.2.1: the registration's answer says how the client authenticates.
            if let method = config.discovered?.tokenEndpointAuthMethod, method != "none" {
                merged.tokenEndpointAuthMethodsSupported = [method]
            }
            document = (merged, clock.boottime())
            // Not `succeeded()`: an endpoint that answered 404 is still suspect.
            if failures > 0 { events.emit(BrokerEvent(kind: .providerBack, provider: config.name)) }
            failures = 0
            backoff = (0, false)
            return merged
        case .failure(let error as OAuthError):
            throw failed(error, doing: "discovery")
        case .failure:
            throw BrokerError.internalError("discovery of \(config.name) failed unexpectedly")
        }
    }

    /// Refuses at once while a provider that stopped answering is being given time. The
    /// back-off counts on boot time: a wall clock stepped back never lengthens it.
    func checkBackoff() throws(BrokerError) {
        let now = clock.boottime()
        if now < backoff.until {
            let wait = Int((backoff.until - now).rounded(.up))
            throw BrokerError.providerUnreachable(
                provider: config.name, retryAfter: wait,
                message: "\(config.name) did not answer recently: try again in \(wait) s")
        }
    }

    /// An endpoint answered: the back-off ends.
    func succeeded() {
        if failures > 0 { events.emit(BrokerEvent(kind: .providerBack, provider: config.name)) }
        failures = 0
        backoff = (0, false)
        notFoundAfterRereading = false
    }

    /// This computer's network changed (a link came up, an address or a route was added):
    /// a back-off begun because the provider could not be reached ends, so the next request
    /// goes to the provider at once. One begun for a provider's own answer (busy, broken)
    /// stays. True when one ended.
    func networkChanged() -> Bool {
        guard backoff.unreachable, backoff.until > clock.boottime() else { return false }
        backoff = (0, false)
        return true
    }

    /// Turns an OAuth failure into the broker's error and, for an unreachable provider,
    /// starts or lengthens the back-off (1, 2, 4 … 30 s). An endpoint that answered 404
    /// makes the next caller read the discovery document again.
    func failed(_ error: OAuthError, doing what: String) -> BrokerError {
        let name = config.name
        switch error {
        case .unreachable(let m):
            let delay = backOff(unreachable: true)
            return .providerUnreachable(provider: name, retryAfter: delay, message: "\(name): \(m); try again in \(delay) s")
        case .invalidResponse(let m):
            let delay = backOff()
            return .providerUnreachable(provider: name, retryAfter: delay, message: "\(name): \(m); try again in \(delay) s")
        case .endpointNotFound(let m) where notFoundAfterRereading:
            document = nil
            let delay = backOff()
            return .providerUnreachable(provider: name, retryAfter: delay, message: "\(name): \(m), although its discovery document was read again; try again in \(delay) s")
        case .endpointNotFound(let m):
            document = nil
            notFoundAfterRereading = true
            let configured = config.endpoints == ConfiguredEndpoints() ? "" : " (if it is an endpoint set in config.toml, correct it there)"
            return .providerUnreachable(provider: name, retryAfter: 0, message: "\(name): \(m); authbroker reads its discovery document again on the next request: try again\(configured)")
        case .busy(let m, let retryAfter):
            let delay = backOff(atLeast: retryAfter.map { min($0.seconds(from: clock.now()), Self.longestRetryAfter) } ?? 0)
            return .providerUnreachable(provider: name, retryAfter: delay, message: "\(name): \(m); try again in \(delay) s")
        case .configuration(let m):
            return .configuration(provider: name, message: "\(name): \(m)")
        case .provider("invalid_client", _, _):
            // RFC 6749 §5.2: the client's authentication failed; no sign-in changes that.
            return .providerError(provider: name, oauthError: "invalid_client", message: "\(name) refused the \(what): \(error.message); check client_id and client_secret under [providers.\(name)] in config.toml (or the secret stored with `authctl set-secret --provider \(name)`) against the client registered at the provider")
        case .provider(let code, _, _):
            return .providerError(provider: name, oauthError: code, message: "\(name) refused the \(what): \(error.message)")
        }
    }

    /// A sign-in that cannot go on: the code or device grant is spent, so retrying the
    /// request is no use and the sentence says to sign in again.
    func failedSignIn(_ error: OAuthError) -> BrokerError {
        let name = config.name
        let again = "run `authctl login --provider \(name)` again"
        switch error {
        case .unreachable(let m), .invalidResponse(let m), .busy(let m, _):
            let delay = backOff()
            return .loginFailed(provider: name, message: "the sign-in to \(name) was abandoned because the provider failed (\(m)): \(again) in \(delay) s or later")
        case .endpointNotFound(let m):
            _ = failed(error, doing: "sign-in")
            return .loginFailed(provider: name, message: "the sign-in to \(name) was abandoned: \(m); authbroker reads its discovery document again: \(again)")
        case .configuration, .provider:
            return failed(error, doing: "sign-in")
        }
    }

    /// The longest `Retry-After` honoured: a provider that asks for more is asked again
    /// after five minutes, so that a mistaken header cannot stop refreshes for hours.
    static let longestRetryAfter = 300

    private func backOff(atLeast asked: Int = 0, unreachable: Bool = false) -> Int {
        failures += 1
        if failures == 1 { events.emit(BrokerEvent(kind: .providerUnreachable, provider: config.name)) }
        let delay = max(asked, min(30, 1 << min(failures - 1, 5)))
        backoff = (clock.boottime() + Double(delay), unreachable)
        return delay
    }
}
