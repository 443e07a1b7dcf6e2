import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The providers' signing keys (JWKS, RFC 7517 §5), fetched from each `jwks_uri` through
/// an `HTTPTransport` and kept in memory.
///
/// A set is fetched when first needed and again once it is older than `maximumAge`. When
/// a token names a `kid` the set does not hold, `refetch(_:)` fetches it again — but never
/// sooner than `minimumRefetchInterval` after the previous request to that URL, so a
/// stream of tokens with made-up key IDs cannot turn the broker into a load generator
/// against the provider. Concurrent callers share one request per URL.
public actor JWKSCache {
    /// The transport the keys come through.
    public nonisolated let transport: any HTTPTransport
    /// The least time between two requests for the same JWKS.
    public nonisolated let minimumRefetchInterval: TimeInterval
    /// How long a fetched set is used before it is fetched again on the next need.
    public nonisolated let maximumAge: TimeInterval
    /// The most keys read from one set; a longer set is refused as not a provider's.
    public static let maximumKeys = 100

    private let clock: @Sendable () -> TimeInterval
    private var sets: [String: (keys: JWKSet, fetchedAt: TimeInterval)] = [:]
    private var lastRequest: [String: TimeInterval] = [:]
    private var inFlight: [String: Task<Result<JWKSet, OAuthError>, Never>] = [:]
    /// Requests sent so far, per URL (for `status`-style counters and tests).
    public private(set) var requestCount: [String: Int] = [:]

    /// Makes an empty cache. `clock` gives monotonic seconds (the system uptime by
    /// default); tests pass their own to move time.
    public init(transport: any HTTPTransport, minimumRefetchInterval: TimeInterval = 60, maximumAge: TimeInterval = 3600,
                clock: @escaping @Sendable () -> TimeInterval = { ProcessInfo.processInfo.systemUptime }) {
        self.transport = transport
        self.minimumRefetchInterval = minimumRefetchInterval
        self.maximumAge = maximumAge
        self.clock = clock
    }

    /// The key set at `jwksURI`: the cached one, or a fresh one if none is held or it is
    /// older than `maximumAge` (a stale set is still served if the refetch is too soon
    /// after the last request or fails).
    public func keys(_ jwksURI: String) async throws(OAuthError) -> JWKSet {
        if let held = sets[jwksURI], clock() - held.fetchedAt < maximumAge { return held.keys }
        if let held = sets[jwksURI] {
            if let fresh = try? await refetch(jwksURI) { return fresh }
            return held.keys
        }
        return try await fetch(jwksURI)
    }

    /// Fetches the set at `jwksURI` again after a token named an unknown `kid`; returns
    /// nil, without a request, when the last request to that URL is less than
    /// `minimumRefetchInterval` ago.
    public func refetch(_ jwksURI: String) async throws(OAuthError) -> JWKSet? {
        if inFlight[jwksURI] == nil, let last = lastRequest[jwksURI], clock() - last < minimumRefetchInterval {
            return nil
        }
        return try await fetch(jwksURI)
    }

    /// One request for `jwksURI`, shared by every caller that asks while it runs.
    private func fetch(_ jwksURI: String) async throws(OAuthError) -> JWKSet {
        let task: Task<Result<JWKSet, OAuthError>, Never>
        if let running = inFlight[jwksURI] {
            task = running
        } else {
            lastRequest[jwksURI] = clock()
            requestCount[jwksURI, default: 0] += 1
            let transport = transport
            task = Task { await Self.download(jwksURI, transport: transport) }
            inFlight[jwksURI] = task
        }
        let result = await task.value
        if inFlight[jwksURI] == task {
            inFlight[jwksURI] = nil
            if case .success(let keys) = result { sets[jwksURI] = (keys, clock()) }
        }
        return try result.get()
    }

    private static func download(_ jwksURI: String, transport: any HTTPTransport) async -> Result<JWKSet, OAuthError> {
        do throws(OAuthError) {
            try EndpointPolicy.check(jwksURI, what: "the provider's jwks_uri")
            let response = try await transport.send(HTTPRequest(
                method: "GET", url: jwksURI, headers: ["Accept": "application/jwk-set+json, application/json"]))
            let place = "the provider's key set at \(EndpointPolicy.describe(jwksURI))"
            guard response.status == 200 else {
                throw .invalidResponse("\(place) answered HTTP \(response.status)\(ProviderAnswer.statusHint(response.status))")
            }
            return .success(try JWKSet(json: response.body, place: place))
        } catch {
            return .failure(error)
        }
    }
}

/// One provider's key set: every key it lists, each with the public key it makes or the
/// reason it makes none (one bad key does not spoil the others).
public struct JWKSet: Sendable {
    /// A key of the set.
    public struct Entry: Sendable {
        /// The key's members.
        public var jwk: JWK
        /// The key, or why the members make no valid key.
        public var publicKey: Result<PublicKey, CryptoError>
    }

    /// The keys in the provider's order.
    public var entries: [Entry]

    /// Makes a set from keys in hand.
    public init(_ jwks: [JWK]) {
        entries = jwks.map { jwk in Entry(jwk: jwk, publicKey: Result { () throws(CryptoError) in try jwk.publicKey() }) }
    }

    /// Reads a JWKS document (`{"keys": [...]}`); entries that are not JSON objects with a
    /// string `kty` are skipped, as RFC 7517 §5 asks.
    init(json body: [UInt8], place: String) throws(OAuthError) {
        guard let document = try? JSONDecoder().decode([String: JSONValue].self, from: Data(body)),
              case .array(let keys)? = document["keys"]
        else { throw .invalidResponse("\(place) is not a JSON Web Key Set") }
        guard keys.count <= JWKSCache.maximumKeys else {
            throw .invalidResponse("\(place) lists \(keys.count) keys, more than the \(JWKSCache.maximumKeys) authbroker reads")
        }
        self.init(keys.compactMap(Self.jwk(_:)))
    }

    private static func jwk(_ value: JSONValue) -> JWK? {
        guard case .object(let members) = value, let kty = members["kty"]?.stringValue else { return nil }
        var keyOps: [String]?
        if case .array(let operations)? = members["key_ops"] { keyOps = operations.compactMap(\.stringValue) }
        return JWK(kty: kty, kid: members["kid"]?.stringValue, use: members["use"]?.stringValue,
                   alg: members["alg"]?.stringValue, keyOps: keyOps, crv: members["crv"]?.stringValue,
                   n: members["n"]?.stringValue, e: members["e"]?.stringValue,
                   x: members["x"]?.stringValue, y: members["y"]?.stringValue)
    }
}
