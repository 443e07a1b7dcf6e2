import BrokerProtocol
import Logging
import OAuth
import SecretStore
import Synchronization

/// Resource-first discovery (RFC 9728): for a resource no configured provider lists, its
/// protected resource metadata names the authorization server; once the user trusts that
/// server (`[discovery]`: asked, `trusted_issuers`, or `mode = "allow"`), its metadata is
/// read (RFC 8414, OpenID discovery as the fallback), a client is found for it (a Client
/// ID Metadata Document, or RFC 7591 registration) and it becomes a provider under a
/// generated name, kept in the store with its client. Nothing is sent to a server before
/// it is trusted. Registers `discovery.resolve` and `discovery.trust`.
///
/// Owns: the resources' metadata (cached for its HTTP lifetime) and the servers the user
/// trusted in this run. Depends on providers (where what it finds is put in force),
/// accounts (whether a sign-in exists) and the store (the providers it found).
public final class DiscoveryService: ResourceDiscovering, RegistersMethods, Sendable {
    private let providers: ProvidersService
    private let accounts: AccountsService
    private let store: any CredentialStore
    private let resources: ResourceDiscovery
    private let registrar: ClientRegistrar
    private let clock: WallClock
    private let logger: Logger
    /// The desktop's question for a waiting program; nil: such programs are refused.
    private let asker: (any ServerTrustAsking)?
    /// What a rename does to the accounts' cached tokens and refreshes.
    private let tokens: TokenForgetting?
    private let state = Mutex(State())
    /// One enrolment per server at a time: two callers meeting a new server register once.
    private let enrolments = IssuerTurns()

    private struct State {
        /// The resources' metadata, with when it must be read again.
        var metadata: [String: (value: ProtectedResourceMetadata, until: Double)] = [:]
        /// Servers the user trusted (`discovery.trust`) in this run, before they were enrolled.
        var trusted: Set<String> = []
    }

    /// The longest a resource's metadata is kept, whatever its `Cache-Control` says, and how
    /// long when it says nothing.
    static let longestMetadataLife = 86_400.0
    static let defaultMetadataLife = 3_600.0
    /// Resources whose metadata is kept at once; the one expiring first makes room.
    static let maxMetadata = 256

    init(providers: ProvidersService, accounts: AccountsService, store: any CredentialStore,
                transport: any HTTPTransport, clock: WallClock, logger: Logger, asker: (any ServerTrustAsking)? = nil,
                tokens: TokenForgetting? = nil) {
        self.asker = asker
        self.tokens = tokens
        self.providers = providers
        self.accounts = accounts
        self.store = store
        self.resources = ResourceDiscovery(transport: transport)
        self.registrar = ClientRegistrar(transport: transport)
        self.clock = clock
        self.logger = logger
    }

    // MARK: discovery.resolve

    /// What the resource's metadata says and where the broker stands with its server. A
    /// trusted server is enrolled (metadata, client) on the way; an untrusted one is only
    /// named.
    public func resolve(_ p: DiscoveryResolveParams) async throws(BrokerError) -> DiscoveryResolveResult {
        // A resource a provider in force already serves needs no metadata: config.toml
        // (or an earlier discovery) decided.
        if p.resourceMetadata == nil, let served = served(p.resource) { return served }
        let settings = try discoveryOn(for: p.resource)
        let metadata = try await metadata(for: p.resource, at: p.resourceMetadata)
        let issuer = chooseServer(metadata)
        if let configured = providers.config.configuredProviders.first(where: { $0.issuer == issuer }) {
            if !configured.serves(resource: metadata.resource) {
                providers.discovered { $0.resources[configured.name, default: []].append(metadata.resource) }
                logger.notice("a resource's metadata names a configured provider", metadata: [
                    "provider": "\(configured.name)", "resource": "\(EndpointPolicy.describe(metadata.resource))"])
            }
            return answer(metadata, provider: configured.name, issuer: issuer, trusted: true, configured: true)
        }
        let trusted = providers.discoveries.provider(issuer: issuer) != nil || settings.trusts(issuer)
            || state.withLock { $0.trusted.contains(issuer) }
        guard trusted else {
            return answer(metadata, provider: Self.generatedName(for: issuer, taken: takenNames()), issuer: issuer,
                          trusted: false, configured: false)
        }
        let provider = try await enrol(issuer, for: metadata)
        return answer(metadata, provider: provider.name, issuer: issuer, trusted: true, configured: false)
    }

    // MARK: discovery.trust

    /// The user's yes to the server the resource's metadata names: remembered, and the
    /// server enrolled (its metadata read, a client found), ready for a sign-in.
    public func trust(_ p: DiscoveryTrustParams) async throws(BrokerError) -> DiscoveryTrustResult {
        _ = try discoveryOn(for: p.resource)
        let metadata = try await metadata(for: p.resource, at: nil)
        guard metadata.authorizationServers.contains(p.issuer) else {
            throw BrokerError.invalidRequest(message: "the metadata of \(EndpointPolicy.describe(p.resource)) does not name \(EndpointPolicy.describe(p.issuer)) as its authorization server (it names \(metadata.authorizationServers.map(EndpointPolicy.describe).joined(separator: ", "))): nothing was trusted")
        }
        if let configured = providers.config.configuredProviders.first(where: { $0.issuer == p.issuer }) {
            _ = try await resolve(DiscoveryResolveParams(resource: p.resource))
            return DiscoveryTrustResult(provider: configured.name, trusted: true, client: "configured")
        }
        state.withLock { _ = $0.trusted.insert(p.issuer) }
        logger.notice("the user trusted an authorization server", metadata: [
            "issuer": "\(EndpointPolicy.describe(p.issuer))", "resource": "\(EndpointPolicy.describe(p.resource))"])
        let provider = try await enrol(p.issuer, for: metadata)
        return DiscoveryTrustResult(provider: provider.name, trusted: true,
                                    client: provider.discovered?.client.rawValue ?? "configured")
    }

    // MARK: provider.rename

    /// Gives a provider found by discovery the name the user chooses, in its server's turn.
    public func rename(_ p: ProviderRenameParams) async throws(BrokerError) -> ProviderRenameResult {
        try DiscoveredRename.check(p.name)
        guard let old = providers.discoveries.providers[p.provider] else {
            if providers.config.configuredProviders.contains(where: { $0.name == p.provider }) {
                throw BrokerError.invalidRequest(message: "\(p.provider) is configured in config.toml: rename its [providers.\(p.provider)] table there and reload authbrokerd")
            }
            throw providers.providerMissing(p.provider)
        }
        guard p.name != old.name else { return ProviderRenameResult(provider: old.name, accounts: 0) }
        guard let tokens else { throw BrokerError.internalError("renaming needs the tokens' state") }
        let rename = DiscoveredRename(providers: providers, accounts: accounts, store: store, tokens: tokens)
        let result = try await enrolments.run(old.issuer) { () async throws(BrokerError) -> ProviderRenameResult in
            try await rename.rename(old, to: p.name)
        }
        logger.notice("a provider found by discovery was renamed", metadata: ["from": "\(old.name)", "to": "\(p.name)"])
        return result
    }

    // MARK: token.get's way in

    /// A program waiting for a sign-in met an untrusted server: the user is asked on the
    /// desktop, shown both hosts; a yes trusts it as `discovery.trust` does. Anything else
    /// (no, no answer, nothing could be shown) is the untrusted refusal, with why.
    func askTrust(_ refusal: BrokerError) async throws(BrokerError) {
        guard case .untrustedServer(let resource, let issuer, _, let resourceHost, let issuerHost, _) = refusal else { throw refusal }
        guard let asker else { throw refusal }
        let answer = await asker.askTrust(TrustRequest(resource: resource, resourceHost: resourceHost, issuer: issuer, issuerHost: issuerHost),
                                          program: Requester.program, seconds: providers.confirmTimeout)
        guard answer == .allowed else {
            let why: String
            switch answer {
            case .denied: why = "you denied it on the desktop"
            case .dismissed: why = "the question on the desktop was closed unanswered"
            case .timedOut: why = "the question on the desktop went unanswered"
            case .unavailable: why = "no desktop notification could ask you"
            case .busy, .programBusy: why = "too many questions wait on the desktop already"
            case .answerableByOthers(let server):
                why = "\(server) lets any program of yours answer questions on the desktop, so authbrokerd does not ask there (trust it at a terminal with `authctl login --resource`, or list it in [discovery] trusted_issuers)"
            case .allowed, .leased: why = ""
            }
            throw BrokerError.untrustedServer(resource: resource, issuer: issuer, provider: "", resourceHost: resourceHost,
                                              issuerHost: issuerHost, why: why)
        }
        _ = try await trust(DiscoveryTrustParams(resource: resource, issuer: issuer))
    }

    /// The provider that serves `resource`, which no provider in force lists: the one its
    /// metadata names, once trusted. `named`, when the caller named a provider, must be it.
    func provider(serving resource: String, named: String?) async throws(BrokerError) -> Provider {
        let found = try await resolve(DiscoveryResolveParams(resource: resource))
        guard found.trusted else {
            throw BrokerError.untrustedServer(resource: found.resource, issuer: found.issuer, provider: found.provider,
                                              resourceHost: found.resourceHost, issuerHost: found.issuerHost)
        }
        if let named, named != found.provider {
            throw BrokerError.invalidRequest(message: "the metadata of \(EndpointPolicy.describe(resource)) names \(found.issuerHost) as its authorization server, which is \(found.provider), not \(named): ask without --provider, or with --provider \(found.provider)")
        }
        return try providers.provider(found.provider)
    }

    /// A step-up (RFC 6750 §3.1 `insufficient_scope`): the scopes join those the provider's
    /// sign-ins ask for, kept with it, and the caller is told to sign in again (or, waiting
    /// for a sign-in, gets one).
    func consentNeeded(provider name: String, resource: String?, scopes: [String]) async -> BrokerError {
        if let issuer = providers.discoveries.providers[name]?.issuer {
            _ = try? await enrolments.run(issuer) { () async throws(BrokerError) -> Bool in
                guard var p = self.providers.discoveries.providers[name] else { return false }
                for s in scopes where !p.scopes.contains(s) { p.scopes.append(s) }
                await self.install(p)
                return true
            }
        }
        let list = scopes.joined(separator: " ")
        let again = resource.map { "`authctl login --resource \($0)`" } ?? "`authctl login --provider \(name)`"
        logger.notice("a resource asks for scopes the sign-in did not grant: the next sign-in asks for them", metadata: [
            "provider": "\(name)", "scopes": "\(list)"])
        return .loginRequired(provider: name, message: "the sign-in at \(name) does not grant \(list), which \(resource.map { ResourceURL.host(of: $0) ?? $0 } ?? "the resource") asks for: sign in again to consent to it (\(again))")
    }

    // MARK: The steps

    /// The answer for a resource that a provider in force lists (or the default one serves).
    private func served(_ resource: String) -> DiscoveryResolveResult? {
        let config = providers.config
        let listing = config.providers.filter { $0.resources.contains(resource) }
        guard let p = (listing.count == 1 ? listing.first : nil)
            ?? providers.provider(orDefault: nil).map(\.config).flatMap({ $0.serves(resource: resource) ? $0 : nil })
        else { return nil }
        if p.discovered != nil, config.discovery.mode == .off { return nil }
        return DiscoveryResolveResult(
            resource: resource, provider: p.name, issuer: p.issuer, resourceHost: ResourceURL.host(of: resource) ?? resource,
            issuerHost: ResourceURL.host(of: p.issuer) ?? p.issuer, trusted: true,
            signedIn: accounts.list(provider: p.name).contains { $0.state == .ready }, configured: p.discovered == nil)
    }

    /// The settings, unless `[discovery] mode = "off"`.
    private func discoveryOn(for resource: String) throws(BrokerError) -> DiscoverySettings {
        let settings = providers.config.discovery
        guard settings.mode != .off else { throw Self.off(resource) }
        return settings
    }

    /// The refusal under `mode = "off"`.
    static func off(_ resource: String) -> BrokerError {
        .configuration(provider: nil, message: "no configured provider lists \(EndpointPolicy.describe(resource)), and [discovery] mode = \"off\" in config.toml: add it to the resources of its provider there, or set mode = \"ask\"")
    }

    /// The resource's metadata, from the cache while it lives.
    private func metadata(for resource: String, at url: String?) async throws(BrokerError) -> ProtectedResourceMetadata {
        let now = clock.now()
        if url == nil, let cached = state.withLock({ $0.metadata[resource] }), cached.until > now { return cached.value }
        do throws(OAuthError) {
            try ResourceURL.check(resource)
        } catch {
            throw Self.metadataFailed(error, resource: resource)
        }
        // Each new resource a caller names costs a request: charged as a refresh is.
        try ProviderRequests.charge()
        let fetched: Fetched<ProtectedResourceMetadata>
        do {
            fetched = try await resources.protectedResourceMetadata(for: resource, metadataURL: url)
        } catch {
            throw Self.metadataFailed(error, resource: resource)
        }
        let life = min(Double(fetched.maxAge ?? Int(Self.defaultMetadataLife)), Self.longestMetadataLife)
        state.withLock { s in
            if s.metadata.count >= Self.maxMetadata {
                s.metadata = s.metadata.filter { $0.value.until > now }
                if s.metadata.count >= Self.maxMetadata, let soonest = s.metadata.min(by: { $0.value.until < $1.value.until }) {
                    s.metadata[soonest.key] = nil
                }
            }
            s.metadata[resource] = (fetched.value, now + life)
        }
        return fetched.value
    }

    /// The server to use of those the metadata names: a configured one, one found before, a
    /// trusted one, else the first.
    private func chooseServer(_ m: ProtectedResourceMetadata) -> String {
        let configured = Set(providers.config.configuredProviders.map(\.issuer))
        let settings = providers.config.discovery
        let found = providers.discoveries
        return m.authorizationServers.first(where: configured.contains)
            ?? m.authorizationServers.first(where: { found.provider(issuer: $0) != nil })
            ?? m.authorizationServers.first(where: settings.trusts)
            ?? m.authorizationServers[0]
    }

    /// The provider for a trusted server: the one found before (with this resource added),
    /// or a new one with its client, put in force and kept in the store.
    private func enrol(_ issuer: String, for m: ProtectedResourceMetadata) async throws(BrokerError) -> ProviderConfig {
        try await enrolments.run(issuer) { () async throws(BrokerError) -> ProviderConfig in
            if var known = self.providers.discoveries.provider(issuer: issuer) {
                guard !known.resources.contains(m.resource) else { return known }
                // One provider's tokens are all bound or none is (docs/dpop.md).
                if m.dpopBoundAccessTokensRequired == true, known.dpop == nil {
                    throw BrokerError.configuration(provider: known.name, message: "\(ResourceURL.host(of: m.resource) ?? m.resource) requires DPoP-bound tokens (RFC 9449), but \(known.name), its authorization server, serves authbroker's other resources Bearer tokens, and one provider's tokens are all bound or none is: configure that server in config.toml a second time, under another name, with dpop = true and this resource")
                }
                known.resources.append(m.resource)
                await self.install(known)
                return known
            }
            let enrolment = Enrolment(issuer: issuer, resource: m, name: Self.generatedName(for: issuer, taken: self.takenNames()),
                                      settings: self.providers.config.discovery, resources: self.resources,
                                      registrar: self.registrar, clock: self.clock)
            let config = try await enrolment.run()
            await self.install(config)
            self.logger.notice("a provider was found by discovery", metadata: [
                "provider": "\(config.name)", "issuer": "\(EndpointPolicy.describe(issuer))",
                "client": "\(config.discovered?.client.rawValue ?? "-")"])
            return config
        }
    }

    /// Puts a discovered provider in force and keeps it in the store (a store that does not
    /// take it costs a new registration after a restart, nothing else: logged).
    /// Called in the server's turn (`enrolments`), so that two changes of one provider are
    /// written in the order they were made.
    private func install(_ config: ProviderConfig) async {
        providers.discovered { $0.providers[config.name] = config }
        guard let item = DiscoveredProviderItem.credential(for: config) else { return }
        do throws(StoreError) {
            try await store.save(item)
        } catch {
            logger.warning("the provider found by discovery could not be kept in the secret store: after a restart authbroker registers again", metadata: [
                "provider": "\(config.name)", "error": "\(error.message)"])
        }
    }

    private func takenNames() -> Set<String> { Set(providers.config.providers.map(\.name)) }

    /// A provider name from the issuer's host (and port, when it has one), unique among the
    /// names in force: `login.example.com`, `127.0.0.1:8443`, `login.example.com-2`.
    static func generatedName(for issuer: String, taken: Set<String>) -> String {
        let base = ResourceURL.origin(of: issuer).map { String($0[($0.firstRange(of: "://")?.upperBound ?? $0.startIndex)...]) } ?? "discovered"
        var name = base
        var n = 2
        while taken.contains(name) {
            name = "\(base)-\(n)"
            n += 1
        }
        return name
    }

    private func answer(_ m: ProtectedResourceMetadata, provider: String, issuer: String, trusted: Bool, configured: Bool) -> DiscoveryResolveResult {
        let signedIn = accounts.list(provider: provider).contains { $0.state == .ready }
        return DiscoveryResolveResult(resource: m.resource, provider: provider, issuer: issuer,
                                      resourceHost: ResourceURL.host(of: m.resource) ?? m.resource,
                                      issuerHost: ResourceURL.host(of: issuer) ?? issuer,
                                      trusted: trusted, signedIn: signedIn, configured: configured)
    }

    /// The resource's metadata could not be used: the sentence names the resource.
    static func metadataFailed(_ error: OAuthError, resource: String) -> BrokerError {
        let host = ResourceURL.host(of: resource) ?? EndpointPolicy.describe(resource)
        switch error {
        case .unreachable(let m), .busy(let m, _):
            return .providerUnreachable(provider: host, retryAfter: 1, message: "the metadata of \(EndpointPolicy.describe(resource)) could not be read: \(m); try again")
        case .invalidResponse(let m), .configuration(let m), .endpointNotFound(let m):
            let next = m.contains("config.toml") ? "" : "; tell its administrators, or configure its provider in config.toml"
            return .invalidRequest(message: "\(EndpointPolicy.describe(resource)) cannot be used as a resource: \(m)\(next)")
        case .provider:
            return .invalidRequest(message: "\(EndpointPolicy.describe(resource)) cannot be used as a resource: \(error.message)")
        }
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .discoveryResolve, empty: DiscoveryResolveParams(resource: ""),
            access: .checked("the resource, as token.get's") { p in
                .token(provider: nil, targets: [p.resource], scopes: [], params: [])
            },
            mints: true,
            answer: .later { p throws(BrokerError) in try await self.resolve(p) }))
        registrar.add(MethodSpec(
            .providerRename, empty: ProviderRenameParams(provider: "", name: ""),
            access: .open("the user's own management: it renames a provider found by discovery, with its accounts, and answers no token, claim or secret"),
            answer: .later { p throws(BrokerError) in try await self.rename(p) }))
        registrar.add(MethodSpec(
            .discoveryTrust, empty: DiscoveryTrustParams(resource: "", issuer: ""),
            access: .checked("the resource, as token.get's") { p in
                .token(provider: nil, targets: [p.resource], scopes: [], params: [])
            },
            mints: true,
            answer: .later { p throws(BrokerError) in try await self.trust(p) }))
    }
}

/// How the tokens service reaches discovery: one call, for a resource no provider lists.
protocol ResourceDiscovering: Sendable {
    func provider(serving resource: String, named: String?) async throws(BrokerError) -> Provider
    /// The resource needs `scopes` the sign-in did not grant: the provider's next sign-in
    /// asks for them too; the answer is the "sign in again" error.
    func consentNeeded(provider name: String, resource: String?, scopes: [String]) async -> BrokerError
    /// A waiting program met an untrusted server: asks the user (the desktop), trusting it
    /// on a yes; throws the refusal otherwise.
    func askTrust(_ refusal: BrokerError) async throws(BrokerError)
}
