@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import NIOCore
import XCTest

/// `daemon.status`'s `token_requests` counts every `token.get` the caller policy lets
/// through, whichever path answers it: the cache's, a refresh, or one a `confirm = true`
/// rule asked the user about first (which never meets the cache's fast path).
final class RequestCountTests: XCTestCase {
    private static let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: "/proc/self/exe",
                                   executableID: FileID(path: "/proc/self/exe"), cgroup: nil)

    /// A request under a `confirm` rule the user allows is counted once, as one without
    /// rules is.
    func testATokenRequestUnderAConfirmRuleIsCounted() async throws {
        let exe = String(cString: realpath("/proc/self/exe", nil))
        let broker = try Self.broker(rules: """
            [[allow]]
            exe = "\(exe)"
            confirm = true
            resources = ["https://api"]
            """)
        let answer = try await Self.ask(broker)
        XCTAssertTrue(answer.contains(#""error""#), "nothing is signed in: \(answer)")
        XCTAssertEqual(broker.counters.snapshot().tokenRequests, 1, "the allowed request is counted")
    }

    /// Without rules the same request is counted once (the cache's path, a miss).
    func testATokenRequestWithoutRulesIsCountedOnce() async throws {
        let broker = try Self.broker(rules: "")
        _ = try await Self.ask(broker)
        XCTAssertEqual(broker.counters.snapshot().tokenRequests, 1)
    }

    /// One `token.get` through the daemon's method table, its later work awaited.
    private static func ask(_ broker: Broker) async throws -> String {
        let table = MethodTable.broker(broker)
        let line = #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"resource":"https://api"}}"#
        let handler = try XCTUnwrap(table["token.get"])
        let reply = handler(RequestLine(scanned: nil, bytes: ByteBuffer(string: line)), .number(1), RPCCodec(),
                            { _ throws(BrokerError) in me }, ConfirmAnswers())
        switch reply {
        case .now(let data), .subscription(_, let data): return String(decoding: data, as: UTF8.self)
        case .later(let work), .untilClosed(let work): return String(decoding: await work(), as: UTF8.self)
        }
    }

    private static func broker(rules: String) throws -> Broker {
        try testBroker(corpConfig(rules: rules), confirmer: SaysYes())
    }
}

/// A STUB of the desktop's Allow/Deny question (no notification server in the tests): the
/// user says Allow.
private struct SaysYes: CallerConfirming {
    func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer { .allowed }
}
