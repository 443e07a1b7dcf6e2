@testable import BrokerCore
import Logging
import OAuth
import SecretStore

/// A real `Broker` for the server's tests: the configuration's text, a store (memory by
/// default), a provider transport (by default a STUB that cannot be reached), a clock and
/// the token cache (a test may put tokens in it as a refresh does), and who answers
/// `confirm = true` rules (nobody by default: such rules then serve nothing).
func testBroker(_ toml: String, store: any CredentialStore = MemoryStore(), transport: any HTTPTransport = UnreachableProvider(),
                clock: WallClock = .system, cache: TokenCache = TokenCache(),
                confirmer: (any CallerConfirming)? = nil) throws -> Broker {
    Broker(config: try ConfigLoader.parse(toml, file: "config.toml"), store: store, transport: transport,
           socketPath: "/nonexistent/socket", clock: clock, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
           redirects: nil, announcer: nil, confirmer: confirmer, trustAsker: nil, audit: nil,
           refreshAheadTick: .seconds(15), storeRetryInterval: .seconds(5), cache: cache)
}

/// A STUB provider that cannot be reached: no request in the tests that use it should get that far.
struct UnreachableProvider: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        throw .unreachable("the STUB provider cannot be reached")
    }
}

/// One provider, `corp` (a STUB issuer that cannot be reached), with the resource
/// `https://api`, and `rules` (`[[allow]]` tables) after it.
func corpConfig(rules: String) -> String {
    """
    [daemon]
    store = "memory"

    [providers.corp]
    issuer = "https://idp.invalid"
    client_id = "authbroker"
    resources = ["https://api"]

    \(rules)
    """
}
