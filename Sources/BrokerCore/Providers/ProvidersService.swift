#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import BrokerProtocol
import Logging
import OAuth
import SecretStore
import Synchronization

/// The providers service: the configuration in force and the run-time providers built from
/// it (discovery, endpoint overrides, back-off), their ID-token keys, client secrets kept in
/// the store, and how the last reload ended. Registers `provider.set_secret`.
///
/// Owns: the `ProviderTable` (replaced whole by a reload or a stored secret), the
/// `IDTokenVerifier` (JWKS cache), the last reload's refusal.
public final class ProvidersService: PolicySource, RegistersMethods, Sendable {
    /// Each replacement of the table (a reload, a stored client secret) counts as a change:
    /// part of `TokensService.generation`.
    private let table: CountedMutex<ProviderTable>
    /// Whether the policy in force has no rules, set with the table: read on every request.
    private let policyOpen: Atomic<Bool>
    /// Whether `[discovery] mode = "off"`, set with the table: read on every cache hit of
    /// a discovered provider.
    private let discoveryOff: Atomic<Bool>
    private let transport: any HTTPTransport
    private let clock: WallClock
    /// Told when a provider stops answering and when it answers again.
    private let events: EventHub
    /// Checks every ID token received against its provider's keys (JWKS, cached).
    private let idTokens: IDTokenVerifier
    /// The last reload, when it was refused (`noteReload`).
    private let refusedReload = Mutex<ReloadRefusedStatus?>(nil)
    /// Where `provider.set_secret` keeps a client secret.
    private let store: any CredentialStore
    private let logger: Logger

    public init(config: BrokerConfig, transport: any HTTPTransport, store: any CredentialStore, clock: WallClock = .system,
                events: EventHub = EventHub(), logger: Logger) {
        self.transport = transport
        self.clock = clock
        self.events = events
        self.store = store
        self.logger = logger
        self.idTokens = IDTokenVerifier(keys: JWKSCache(transport: transport))
        self.table = CountedMutex(ProviderTable(config: config, keeping: [:], transport: transport, clock: clock, events: events))
        self.policyOpen = Atomic(config.policy.isOpen)
        self.discoveryOff = Atomic(config.discovery.mode == .off)
    }

    /// The configuration in force.
    public var config: BrokerConfig { table.withLock { $0.config } }

    /// The `[[allow]]` rules in force (none: every process of the user is served).
    public var callerPolicy: CallerPolicy { table.withLock { $0.config.policy } }  // not `config`: no copy of the whole configuration

    /// Whether no `[[allow]]` rule is in force: no lock, no copy (`CallerGate.isOpen`).
    public var callerPolicyIsOpen: Bool { policyOpen.load(ordering: .acquiring) }

    public var confirmTimeout: Int { table.withLock { $0.config.daemon.confirmTimeout } }

    /// Changes each time the configuration in force or the providers are replaced (never goes back).
    var generation: UInt64 { table.generation }

    /// `[daemon] refresh_margin`, read on every cache hit: one lock, no copy.
    var refreshMargin: Int { table.withLock { $0.config.daemon.refreshMargin } }

    /// `[daemon] cache_misses_per_minute`: requests one connection may make that the cache
    /// cannot answer (0: no limit). Read on each miss, so a reload applies at once.
    public var cacheMissesPerMinute: Int { table.withLock { $0.config.daemon.cacheMissesPerMinute } }

    public func defaultProviderName() -> String? { provider(orDefault: nil)?.name }

    /// The provider a request means, for methods that need no account (sign-in, secrets).
    func provider(_ name: String?, resource: String? = nil) throws(BrokerError) -> Provider {
        guard let provider = provider(orDefault: name, resource: resource) else { throw providerMissing(name) }
        return provider
    }

    /// The provider of that name, or without a name: the one discovery found `resource`
    /// for, else the default one (`default_provider`, or the only one config.toml has).
    /// One lock, no copies.
    func provider(orDefault name: String?, resource: String? = nil) -> Provider? {
        table.withLock { t in
            if let name { return t.providers[name] }
            if let resource, let found = t.byResource[resource] { return t.providers[found] }
            if let d = t.config.daemon.defaultProvider { return t.providers[d] }
            return t.file.providers.count == 1 ? t.providers[t.file.providers[0].name] : nil
        }
    }

    /// Whether `[discovery] mode = "off"`: discovered providers serve nothing.
    var discoveryIsOff: Bool { discoveryOff.load(ordering: .acquiring) }

    /// What discovery has added to the configuration.
    var discoveries: DiscoveredProviders { table.withLock { $0.found } }

    /// `file` (config.toml's providers) with what discovery added laid over it.
    func withDiscoveries(_ file: BrokerConfig) -> BrokerConfig { table.withLock { $0.found.applied(to: file) } }

    /// Adds to what discovery found (a provider, a resource) and puts it in force at once;
    /// the providers whose configuration does not change keep their state.
    func discovered(_ change: (inout DiscoveredProviders) -> Void) {
        table.changing { t in
            var found = t.found
            change(&found)
            t = ProviderTable(config: t.file, found: found, storedSecrets: t.storedSecrets,
                              keeping: t.providers, transport: transport, clock: clock, events: events)
        }
    }

    /// The error for a request whose provider is not configured, or names none when it must.
    func providerMissing(_ name: String?) -> BrokerError {
        let known = config.providers.map(\.name).joined(separator: ", ")
        let configured = table.withLock { $0.file.providers.isEmpty }
        if let name, name.isEmpty {
            return .unknownProvider(message: "the provider name is empty: name one of the configured providers (\(known))")
        }
        if let name {
            return .unknownProvider(message: "no provider named \(name) is configured (configured: \(known))")
        }
        if known.isEmpty || configured {
            return .unknownProvider(message: "no provider is configured: name a resource (`authctl token --resource URL`: its metadata names its provider), or add a [providers.NAME] table with issuer and client_id to config.toml")
        }
        return .unknownProvider(message: "several providers are configured (\(known)): choose one with --provider, or set default_provider in [daemon]")
    }

    /// Puts `new` (config.toml's part; nil: the one in force) in force with what discovery
    /// found, the stored client secrets and `secrets` besides, keeping the
    /// providers whose configuration did not change (with their discovery and back-off);
    /// the stored secrets of the `stale` providers (removed, or another issuer or client) are dropped.
    func replace(config new: BrokerConfig? = nil, adding secrets: [String: String] = [:], forgetting stale: Set<String> = []) {
        table.changing { t in
            let kept = t.storedSecrets.filter { !stale.contains($0.key) }
            t = ProviderTable(config: new ?? t.file, found: t.found, storedSecrets: kept.merging(secrets) { $1 },
                              keeping: t.providers, transport: transport, clock: clock, events: events)
            policyOpen.store(t.config.policy.isOpen, ordering: .releasing)
            discoveryOff.store(t.config.discovery.mode == .off, ordering: .releasing)
        }
    }

    /// This computer's network changed (the daemon's netlink watch): every back-off begun
    /// because a provider could not be reached ends (`Provider.networkChanged`), so the
    /// next request goes to it at once. The names of the providers whose back-off ended.
    public func networkChanged() async -> [String] {
        let all = table.withLock { Array($0.providers.values) }
        var ended: [String] = []
        for provider in all where await provider.networkChanged() { ended.append(provider.name) }
        return ended.sorted()
    }

    /// Verifies an ID token (signature by the provider's key, iss, aud, azp, exp, iat, nonce).
    /// Its `exp` and `iat` are read with `[daemon] clock_skew` of tolerance; a refusal for
    /// either names both clocks and the setting.
    func verifyIDToken(_ idToken: String, provider: Provider, metadata: ProviderMetadata, nonce: String?) async throws(BrokerError) -> IDTokenClaims {
        let skew = table.withLock { $0.config.daemon.clockSkew }
        do {
            return try await idTokens.verify(idToken, metadata: metadata, clientID: provider.config.clientID, nonce: nonce,
                                             now: Date(timeIntervalSince1970: clock.now()), skew: TimeInterval(skew))
        } catch {
            var metadata: Logger.Metadata = ["provider": "\(provider.name)", "reason": "\(error.reason.rawValue)"]
            var message = "\(provider.name) returned an ID token that was refused: \(error.message)"
            if let difference = error.clockDifference {
                metadata["clock_difference"] = "\(Int(difference.rounded()))"
                message += " (or, if \(provider.name)'s clock is the one that is off and cannot be corrected, allow more with `[daemon] clock_skew` in config.toml, now \(skew) s)"
            }
            logger.warning("ID token refused", metadata: metadata)
            throw BrokerError.loginFailed(provider: provider.name, message: message)
        }
    }

    /// The last reload, when it was refused; nil when it took effect or none was asked for.
    public var reloadRefusal: ReloadRefusedStatus? { refusedReload.withLock { $0 } }

    /// Records how the last reload ended, for `daemon.status`: nil when it took effect,
    /// else the sentence that says why it was refused.
    public func noteReload(refused message: String?) {
        let refusal = message.map { ReloadRefusedStatus(at: Int64(clock.now()), message: $0) }
        refusedReload.withLock { $0 = refusal }
    }

    /// Stores a provider's client secret in the Secret Service and puts it in force at once.
    /// A secret in config.toml takes precedence and makes this an error, so there is never
    /// doubt about which one is used.
    public func setClientSecret(_ params: SetSecretParams) async throws(BrokerError) -> SetSecretResult {
        let provider = try provider(params.provider)
        guard provider.isDiscovered || provider.config.clientSecret == nil || table.withLock({ $0.storedSecrets[provider.name] }) != nil else {
            // The file decides, not the request: the configuration error (-32010, authctl exit 12).
            throw BrokerError.configuration(provider: provider.name, message: "\(provider.name) has client_secret in config.toml, which takes precedence: remove it from [providers.\(provider.name)] there and reload authbrokerd (`systemctl --user reload authbroker.service`), then set the secret again")
        }
        let secret = Self.trimmed(params.clientSecret)
        guard !secret.isEmpty, secret.count <= 4096 else {
            throw BrokerError.invalidRequest(message: "the client secret must be between 1 and 4096 characters")
        }
        // A provider found by discovery keeps its client, secret included, in its own item
        // (`DiscoveredProviderItem`): the secret goes there, or a restart would lose the provider.
        let item: StoredCredential
        if provider.isDiscovered {
            var config = provider.config
            config.clientSecret = secret
            guard let encoded = DiscoveredProviderItem.credential(for: config) else {
                throw BrokerError.internalError("the provider found by discovery could not be encoded")
            }
            item = encoded
        } else {
            guard let config = config.provider(named: provider.name) else { throw BrokerError.notSignedIn(provider.name) }
            item = ClientSecretItem.credential(for: config, secret: secret)
        }
        do {
            try await store.save(item)
        } catch {
            throw BrokerError.storeUnavailable(message: "the client secret could not be stored: \(error.message)", reason: error.reason)
        }
        if provider.isDiscovered {
            discovered { $0.providers[provider.name]?.clientSecret = secret }
        } else {
            replace(adding: [provider.name: secret])
        }
        logger.notice("client secret stored", metadata: ["provider": "\(provider.name)"])
        return SetSecretResult(provider: provider.name, stored: true, store: store.kind)
    }

    /// Trimmed with the standard library alone: BrokerCore does not import Foundation.
    static func trimmed(_ text: String) -> String {
        let leading = text.drop(while: \.isWhitespace)
        return String(leading.dropLast(leading.reversed().prefix(while: \.isWhitespace).count))
    }

    public func register(into registrar: inout some MethodRegistrar) {
        registrar.add(MethodSpec(
            .providerSetSecret, empty: SetSecretParams(clientSecret: ""),
            access: .open("the user's own management: it gives the daemon a secret and reveals none; no token, claim or secret is answered"),
            answer: .later { p throws(BrokerError) in try await self.setClientSecret(p) }))
    }
}
