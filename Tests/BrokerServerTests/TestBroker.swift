@testable import BrokerCore
import Logging
import OAuth
import SecretStore

/// A real `Broker` for the server's tests: the configuration's text, a store (memory by
/// default), a provider transport (by default a STUB that cannot be reached), a clock and
/// the token cache (a test may put tokens in it as a refresh does).
func testBroker(_ toml: String, store: any CredentialStore = MemoryStore(), transport: any HTTPTransport = UnreachableProvider(),
                clock: WallClock = .system, cache: TokenCache = TokenCache()) throws -> Broker {
    Broker(config: try ConfigLoader.parse(toml, file: "config.toml"), store: store, transport: transport,
           socketPath: "/nonexistent/socket", clock: clock, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
           redirects: nil, announcer: nil, confirmer: nil, trustAsker: nil, audit: nil,
           refreshAheadTick: .seconds(15), storeRetryInterval: .seconds(5), cache: cache)
}

/// A STUB provider that cannot be reached: no request in the tests that use it should get that far.
struct UnreachableProvider: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        throw .unreachable("the STUB provider cannot be reached")
    }
}
