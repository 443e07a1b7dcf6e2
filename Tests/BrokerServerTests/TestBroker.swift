@testable import BrokerCore
import Logging
import OAuth
import SecretStore

/// A real `Broker` for the server's tests: the configuration's text, a store (memory by
/// default), a provider transport (by default a STUB that cannot be reached) and a clock.
func testBroker(_ toml: String, store: any CredentialStore = MemoryStore(), transport: any HTTPTransport = UnreachableProvider(),
                clock: WallClock = .system) throws -> Broker {
    Broker(config: try ConfigLoader.parse(toml, file: "config.toml"), store: store, transport: transport,
           socketPath: "/nonexistent/socket", clock: clock, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
}

/// A STUB provider that cannot be reached: no request in the tests that use it should get that far.
struct UnreachableProvider: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        throw .unreachable("the STUB provider cannot be reached")
    }
}
