@testable import BrokerCore
@testable import BrokerServer
import BrokerProtocol
import Foundation
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

/// Each kind of answer a method registers (`MethodSpec.Answer`) is served as that kind, on
/// the daemon's pipeline (a thread-safe test loop, since answers that come later are
/// written from another thread): `now` and `nowFor` answer on the event loop with no work
/// started, `later` runs as a task and answers when it is done, `nowOrLater` answers at once
/// when its fast path can and falls back to its work when not, and `subscription` answers
/// at once and leaves the connection subscribed.
@Suite struct MethodShapeTests {
    /// Which of a registration's closures ran, and whether on the connection's event loop.
    final class Ran: Sendable {
        private let calls = Mutex<[String]>([])
        var all: [String] { calls.withLock { $0 } }
        /// - Parameter loop: the connection's, to say whether it ran there (nil: not said).
        func note(_ what: String, on loop: (any EventLoop)? = nil) {
            let name = what + (loop.map { $0.inEventLoop ? " on the loop" : " off the loop" } ?? "")
            calls.withLock { $0.append(name) }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let method: RPCMethod
        let resource: String
        /// Answered with no work started, before the event loop runs anything more.
        let answeredNow: Bool
        /// What ran, in order.
        let ran: [String]
        var testDescription: String { "\(method.rawValue) \(resource)" }
    }

    static let cases: [Case] = [
        Case(method: .accountList, resource: "now", answeredNow: true, ran: ["now on the loop"]),
        Case(method: .daemonStatus, resource: "nowFor", answeredNow: true, ran: ["nowFor on the loop"]),
        Case(method: .tokenGet, resource: "hit", answeredNow: true, ran: ["fast on the loop"]),
        Case(method: .tokenGet, resource: "miss", answeredNow: false, ran: ["fast on the loop", "slow off the loop"]),
        Case(method: .grantsList, resource: "later", answeredNow: false, ran: ["later off the loop"]),
        Case(method: .eventsSubscribe, resource: "subscription", answeredNow: true, ran: ["subscription on the loop"]),
    ]

    /// One method of each kind; the work of those answered later waits for `gate`.
    static func table(_ ran: Ran, _ gate: Gate, _ loop: any EventLoop) -> MethodTable {
        var table = MethodTable()
        func spec(_ method: RPCMethod, _ answer: MethodSpec<TokenGetParams, TokenGetResult>.Answer) {
            table.add(MethodSpec(method, empty: TokenGetParams(), access: .open("a test"), answer: answer))
        }
        spec(.accountList, .now { p in ran.note("now", on: loop); return Handlers.answer(p) })
        spec(.daemonStatus, .nowFor { _, _, p in ran.note("nowFor", on: loop); return Handlers.answer(p) })
        spec(.tokenGet, .nowOrLater(fast: { p in
            ran.note("fast", on: loop)
            return p.resource == "hit" ? Handlers.answer(p) : nil
        }, slow: { p in
            ran.note("slow", on: loop)
            await gate.wait(p.resource ?? "")
            return Handlers.answer(p)
        }))
        spec(.grantsList, .later { p in
            ran.note("later", on: loop)
            await gate.wait(p.resource ?? "")
            return Handlers.answer(p)
        })
        spec(.eventsSubscribe, .subscription { p in
            ran.note("subscription", on: loop)
            return (.subscribe(providers: nil, kinds: [.tokenRefreshed]), Handlers.answer(p))
        })
        return table
    }

    @Test(arguments: cases)
    func eachKindOfAnswerIsServedAsThatKind(_ shape: Case) async throws {
        let (ran, gate, activity, hub) = (Ran(), Gate(), ServerActivity(), EventHub())
        let channel = NIOAsyncTestingChannel()
        let table = Self.table(ran, gate, channel.testingEventLoop)
        try await channel.testingEventLoop.executeInContext {
            try BrokerServer.addHandlers(to: channel.pipeline.syncOperations, table: table, limits: Handlers.limits(),
                                         server: Handlers.server(activity: activity, events: hub), identify: Handlers.me)
        }
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket"))
        let line = #"{"jsonrpc":"2.0","id":1,"method":"\#(shape.method.rawValue)","params":{"resource":"\#(shape.resource)"}}"# + "\n"
        try await channel.writeInbound(channel.allocator.buffer(string: line))

        if shape.answeredNow {
            // Written by the time the request's read is handled: nothing ran after it.
            let written = try await channel.readOutbound(as: ByteBuffer.self)
            #expect(try written.map { try Answer($0).resource } == shape.resource)
            #expect(activity.requestsInFlight == 0, "no work was started")
        } else {
            while await gate.arrived.isEmpty { await Task.yield() }
            try await channel.testingEventLoop.executeInContext {}
            #expect(try await channel.readOutbound(as: ByteBuffer.self) == nil, "not answered before its work is done")
            #expect(activity.requestsInFlight == 1, "its work runs")
            await gate.open(shape.resource)
            let answer = try Answer(try await channel.waitForOutboundWrite(as: ByteBuffer.self))
            #expect(answer.resource == shape.resource)
        }
        #expect(ran.all == shape.ran)
        #expect(hub.subscriberCount == (shape.method == .eventsSubscribe ? 1 : 0))
        _ = try await channel.finish(acceptAlreadyClosed: true)
    }

    /// A method answered at once under a `confirm` rule: `now` waits for the user's yes and
    /// then answers; `nowFor` and `subscription` cannot wait, so they are refused, never
    /// served unasked.
    @Test(arguments: [(RPCMethod.accountList, true), (.daemonStatus, false), (.eventsSubscribe, false)])
    func aKindAnsweredAtOnceUnderAConfirmRuleWaitsForTheUserOrIsRefused(_ method: RPCMethod, waits: Bool) async throws {
        let exe = String(cString: realpath("/proc/self/exe", nil))
        let broker = try testBroker(corpConfig(rules: """
            [[allow]]
            exe = "\(exe)"
            confirm = true
            resources = ["https://api"]
            """), confirmer: Allows())
        let ran = Ran()
        let answers: [RPCMethod: MethodSpec<TokenGetParams, TokenGetResult>.Answer] = [
            .accountList: .now { p in ran.note("now"); return Handlers.answer(p) },
            .daemonStatus: .nowFor { _, _, p in ran.note("nowFor"); return Handlers.answer(p) },
            .eventsSubscribe: .subscription { p in ran.note("subscription"); return (.unsubscribe, Handlers.answer(p)) },
        ]
        var table = MethodTable(gate: broker.gate)
        table.add(MethodSpec(method, empty: TokenGetParams(), access: .checked("the token") { p in
            .token(provider: nil, targets: [p.resource], scopes: [], params: [])
        }, answer: try #require(answers[method])))
        let handler = try #require(table[method.rawValue])
        let line = #"{"jsonrpc":"2.0","id":1,"method":"\#(method.rawValue)","params":{"resource":"https://api"}}"#
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: "/proc/self/exe",
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        let reply = handler(RequestLine(scanned: nil, bytes: ByteBuffer(string: line)), .number(1), RPCCodec(),
                            { _ throws(BrokerError) in me }, ConfirmAnswers())
        switch reply {
        case .later(let work) where waits:
            #expect(ran.all.isEmpty, "not before the user's yes")
            let answer = String(decoding: await work(), as: UTF8.self)
            #expect(answer.contains(#""access_token":"stub-token""#), "\(answer)")
            #expect(ran.all == ["now"])
        case .now(let data) where !waits:
            #expect(String(decoding: data, as: UTF8.self).contains(#""code":-32002"#))
            #expect(ran.all.isEmpty, "refused, never served unasked")
        default:
            Issue.record("\(method.rawValue) was answered as \(reply)")
        }
    }
}

/// A STUB of the desktop's Allow/Deny question: the user says Allow.
private struct Allows: CallerConfirming {
    func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer { .allowed }
}
