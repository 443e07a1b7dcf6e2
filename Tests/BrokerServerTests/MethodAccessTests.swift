@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Foundation
import Logging
import NIOCore
import OAuth
import SecretStore
import Synchronization
import XCTest

/// Issue 23 item 2: every method the daemon serves says who may call it, and the caller
/// policy is asked once, in the method table, before any service. The daemon's real
/// services (a `Broker` over a `MemoryStore` and an unreachable STUB provider, which no
/// request here reaches) register their methods through `RecordingRegistrar`, a
/// recording test double that counts each call of a service's closures and hands the
/// method on to the real `MethodTable`.
final class MethodAccessTests: XCTestCase {
    /// A request of each checked method that asks the policy something.
    private static let examples: [RPCMethod: String] = [
        .tokenGet: #"{"resource":"https://api"}"#,
        .dpopProof: #"{"token":{"resource":"https://api"},"htm":"GET","htu":"https://api/x"}"#,
        .tokenExchange: #"{"audience":"https://api"}"#,
        .tokenReject: #"{"resource":"https://api"}"#,
        .loginStart: #"{"join":true}"#,
        .accountWhoami: #"{}"#,
        .accountUserinfo: #"{}"#,
        .discoveryResolve: #"{"resource":"https://api"}"#,
        .discoveryTrust: #"{"resource":"https://api","issuer":"https://login"}"#,
        .awsCredentials: #"{"role_arn":"arn:aws:iam::123456789012:role/dev"}"#,
        .accountIDToken: #"{}"#,
    ]

    func testEveryMethodIsCheckedByThePolicyOrOpenWithAReason() throws {
        let (table, calls) = try Self.table(rules: """
            [[allow]]
            exe = "/nonexistent/program"
            resources = ["https://api"]
            claims = true
            """)
        for method in RPCMethod.allCases {
            guard let access = table.access[method] else {
                XCTFail("\(method.rawValue) is not registered: a service must register it, checked or open with a reason")
                continue
            }
            switch access {
            case .open(let reason):
                XCTAssertGreaterThan(reason.count, 40, "\(method.rawValue) is open; its reason must say why that is safe")
            case .checked(let what):
                XCTAssertFalse(what.isEmpty, method.rawValue)
                guard let params = Self.examples[method] else {
                    XCTFail("\(method.rawValue) is checked: add a request that asks the policy to `examples`")
                    continue
                }
                guard let handler = table[method.rawValue] else { XCTFail("\(method.rawValue) has no handler"); continue }
                let line = #"{"jsonrpc":"2.0","id":1,"method":"\#(method.rawValue)","params":\#(params)}"#
                let reply = handler(RequestLine(scanned: nil, bytes: ByteBuffer(string: line)), .number(1), RPCCodec(),
                                    { _ throws(BrokerError) in Self.me }, ConfirmAnswers())
                guard case .now(let data) = reply else {
                    XCTFail("\(method.rawValue) went on to its service under a rule that refuses it")
                    continue
                }
                let answer = String(decoding: data, as: UTF8.self)
                XCTAssertTrue(answer.contains(#""code":-32002"#), "\(method.rawValue): \(answer)")
            }
        }
        XCTAssertEqual(calls.all, [:], "no service was called for a refused request")
    }

    /// The same requests with no rules reach their services: the counting sees them.
    func testWithoutRulesTheRequestsReachTheirServices() throws {
        let (table, calls) = try Self.table(rules: "")
        let line = #"{"jsonrpc":"2.0","id":1,"method":"token.get","params":{"resource":"https://api"}}"#
        let handler = try XCTUnwrap(table["token.get"])
        _ = handler(RequestLine(scanned: nil, bytes: ByteBuffer(string: line)), .number(1), RPCCodec(),
                    { _ throws(BrokerError) in Self.me }, ConfirmAnswers())
        XCTAssertEqual(calls.all["token.get"], 1, "the cache was asked (a miss: nothing is signed in)")
    }

    private static let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: "/proc/self/exe",
                                   executableID: FileID(path: "/proc/self/exe"), cgroup: nil)

    /// The daemon's method table over a real `Broker`, its services counted.
    private static func table(rules: String) throws -> (MethodTable, Calls) {
        let broker = try testBroker(corpConfig(rules: rules))
        let calls = Calls()
        var recording = RecordingRegistrar(table: MethodTable(gate: broker.gate), calls: calls)
        broker.register(into: &recording)
        return (recording.table, calls)
    }
}

/// How often each method's service was called.
final class Calls: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    var all: [String: Int] { counts.withLock { $0 } }
    func note(_ method: RPCMethod) { counts.withLock { $0[method.rawValue, default: 0] += 1 } }
}

/// A RECORDING test double of the server's registrar: it wraps every closure of a
/// service's registration in a counter and hands the method on to the real table.
struct RecordingRegistrar: MethodRegistrar {
    var table: MethodTable
    let calls: Calls

    mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>) {
        var counted = spec
        counted.answer = Self.counting(spec.answer, spec.method, calls)
        table.add(counted)
    }

    /// The same answer, each of its closures counted when called.
    private static func counting<P, R>(_ answer: MethodSpec<P, R>.Answer, _ method: RPCMethod, _ calls: Calls) -> MethodSpec<P, R>.Answer {
        func later(_ slow: @escaping @Sendable (P) async throws(BrokerError) -> R) -> @Sendable (P) async throws(BrokerError) -> R {
            { p throws(BrokerError) in
                calls.note(method)
                return try await slow(p)
            }
        }
        switch answer {
        case .now(let now):
            return .now { p throws(BrokerError) in calls.note(method); return try now(p) }
        case .nowFor(let now):
            return .nowFor { identify, answers, p throws(BrokerError) in calls.note(method); return try now(identify, answers, p) }
        case .later(let slow):
            return .later(later(slow))
        case .nowOrLater(let fast, let slow):
            return .nowOrLater(fast: { p in calls.note(method); return fast(p) }, slow: later(slow))
        case .subscription(let change):
            return .subscription { p throws(BrokerError) in calls.note(method); return try change(p) }
        }
    }

    mutating func add(_ spec: SecretAnswerSpec) {
        var counted = spec
        let (calls, method, answer) = (calls, spec.method, spec.answer)
        counted.answer = { id, value throws(BrokerError) in
            calls.note(method)
            return try answer(id, value)
        }
        table.add(counted)
    }
}
