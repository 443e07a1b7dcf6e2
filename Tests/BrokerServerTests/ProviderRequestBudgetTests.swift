@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import OAuth
import SecretStore
import Synchronization
import XCTest

/// `cache_misses_per_minute` charges a connection for the requests the daemon makes to the
/// provider on its behalf, not for answers the cache could not give: while the provider is
/// backed off, a caller on one connection keeps getting the outage's own error (-32004 with
/// its retry hint), never -32009. The daemon's real services and pipeline (a `Broker` over a
/// `MemoryStore`, its `MethodTable`, the connection's handlers on a `NIOAsyncTestingChannel`); the
/// provider is a STUB transport (`BudgetStubProvider`), because a real one cannot be made
/// to answer discovery and then stop answering its token endpoint on cue.
final class ProviderRequestBudgetTests: XCTestCase {
    func testAnOutageAnswersItsOwnErrorNotTheBudgetsWhileNothingIsSent() async throws {
        let provider = BudgetStubProvider(tokenEndpointDown: true)
        let channel = try await Self.connection(limit: 2, provider: provider)
        var answers: [Answer] = []
        for id in 1...6 {
            answers += try await Self.ask(channel, id: id, resource: "https://a")
        }
        XCTAssertEqual(provider.tokenRequests, 1, "only the first request reached the provider; the others met the back-off")
        for answer in answers {
            XCTAssertEqual(answer.errorCode, RPCErrorCode.providerUnreachable.rawValue,
                           "answer \(answer.id ?? 0): \(answer.errorMessage ?? "-")")
            let data = try XCTUnwrap((answer.object["error"] as? [String: Any])?["data"] as? [String: Any])
            XCTAssertNotNil(data["retry_after"], "the outage's retry hint")
        }
    }

    func testTheBudgetStillBoundsTheRequestsThatReachTheProvider() async throws {
        let provider = BudgetStubProvider(tokenEndpointDown: false)
        let channel = try await Self.connection(limit: 2, provider: provider)
        var answers: [Answer] = []
        for (id, resource) in ["https://a", "https://b", "https://c"].enumerated() {
            answers += try await Self.ask(channel, id: id + 1, resource: resource)
        }
        XCTAssertEqual(provider.tokenRequests, 2, "the third new token was refused before any request")
        XCTAssertNil(answers[0].errorCode)
        XCTAssertNil(answers[1].errorCode)
        XCTAssertEqual(answers[2].errorCode, RPCErrorCode.overloaded.rawValue)
        XCTAssertTrue(answers[2].errorMessage?.contains("cache_misses_per_minute") == true, answers[2].errorMessage ?? "-")
        let data = try XCTUnwrap((answers[2].object["error"] as? [String: Any])?["data"] as? [String: Any])
        XCTAssertEqual(data["limit"] as? Int, 2)
        XCTAssertNotNil(data["retry_after"])
    }

    func testJoiningARefreshInFlightCostsNothing() async throws {
        let held = Gate()
        let provider = BudgetStubProvider(tokenEndpointDown: false, hold: held)
        let channel = try await Self.connection(limit: 1, provider: provider)
        try await Self.send(channel, id: 1, resource: "https://a")
        while await held.arrived.isEmpty { await Task.yield() }
        // The same token again while its refresh is at the provider: it joins that refresh
        // (or finds its token in the cache), and neither costs a request.
        try await Self.send(channel, id: 2, resource: "https://a")
        await held.open("token")
        let answers = [try await Self.next(channel), try await Self.next(channel)]
        XCTAssertEqual(Set(answers.compactMap(\.id)), [1, 2])
        for answer in answers {
            XCTAssertNil(answer.errorCode, "answer \(answer.id ?? 0): \(answer.errorMessage ?? "-")")
            XCTAssertEqual(answer.resource, "https://a")
        }
        XCTAssertEqual(provider.tokenRequests, 1)
    }

    /// One connection to the daemon's pipeline over a real `Broker` with one signed-in
    /// account at `provider`, `cache_misses_per_minute = limit`, and a clock that stands
    /// still (the back-off does not run out under a slow machine).
    private static func connection(limit: Int, provider: BudgetStubProvider) async throws -> NIOAsyncTestingChannel {
        let store = MemoryStore()
        let broker = try testBroker("""
            [daemon]
            store = "memory"
            cache_misses_per_minute = \(limit)

            [providers.corp]
            issuer = "\(BudgetStubProvider.issuer)"
            client_id = "authbroker"
            resources = ["https://a", "https://b", "https://c"]
            """, store: store, transport: provider, clock: WallClock { 1_800_000_000 })
        let account = Account(key: AccountKey(provider: "corp", subject: "sub-alice"), issuer: BudgetStubProvider.issuer,
                              clientID: "authbroker", username: "alice", refreshToken: "refresh-0", idToken: nil, state: .ready)
        try await store.save(AccountSecret.credential(for: account))
        await broker.start()
        // Answers that come later are written from another thread: a thread-safe test loop.
        let channel = NIOAsyncTestingChannel()
        let table = MethodTable.broker(broker)
        try await channel.testingEventLoop.executeInContext {
            try BrokerServer.addHandlers(
                to: channel.pipeline.syncOperations, table: table, limits: Handlers.limits(), server: Handlers.server(),
                identify: Handlers.me)
        }
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket"))
        return channel
    }

    /// Sends one `token.get` and waits for its answer (the work runs off the event loop).
    private static func ask(_ channel: NIOAsyncTestingChannel, id: Int, resource: String) async throws -> [Answer] {
        try await send(channel, id: id, resource: resource)
        return [try await next(channel)]
    }

    private static func send(_ channel: NIOAsyncTestingChannel, id: Int, resource: String) async throws {
        let text = Handlers.request(id: id, resource: resource) + "\n"
        var buffer = channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        try await channel.writeInbound(buffer)
    }

    /// The next answer written.
    private static func next(_ channel: NIOAsyncTestingChannel) async throws -> Answer {
        try Answer(try await channel.waitForOutboundWrite(as: ByteBuffer.self))
    }
}

/// A STUB provider: it answers discovery, and its token endpoint either issues a token per
/// refresh or cannot be reached. It counts the token requests that reach it; with `hold`,
/// each waits for the test to open "token" before it is answered.
final class BudgetStubProvider: HTTPTransport {
    static let issuer = "https://idp.example"
    private let tokenEndpointDown: Bool
    private let hold: Gate?
    private let count = Mutex(0)
    var tokenRequests: Int { count.withLock { $0 } }

    init(tokenEndpointDown: Bool, hold: Gate? = nil) {
        self.tokenEndpointDown = tokenEndpointDown
        self.hold = hold
    }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let base = Self.issuer
        switch request.url {
        case base + "/.well-known/openid-configuration":
            return Self.json(#"{"issuer":"\#(base)","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)/jwks"}"#)
        case base + "/token":
            let n = count.withLock { n in
                n += 1
                return n
            }
            await hold?.wait("token")
            if tokenEndpointDown { throw .unreachable("the STUB provider's token endpoint is down") }
            return Self.json(#"{"access_token":"stub-at-\#(n)","token_type":"Bearer","expires_in":300}"#)
        default:
            throw .unreachable("the STUB provider has no \(request.url)")
        }
    }

    private static func json(_ text: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }
}
