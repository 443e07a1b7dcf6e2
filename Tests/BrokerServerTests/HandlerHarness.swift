@testable import BrokerCore
import BrokerProtocol
import Foundation
@testable import BrokerServer
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// Holds `token.get` answers back until the test lets them go, by resource: a STUB for the
/// broker's slow path, whose real answers (refreshes at a provider) cannot be made to finish
/// in a chosen order.
actor Gate {
    private var waiting: [String: CheckedContinuation<Void, Never>] = [:]
    private var opened: Set<String> = []
    private(set) var arrived: [String] = []

    func wait(_ key: String) async {
        arrived.append(key)
        if opened.contains(key) { return }
        await withCheckedContinuation { waiting[key] = $0 }
    }

    func open(_ key: String) {
        opened.insert(key)
        waiting.removeValue(forKey: key)?.resume()
    }
}

enum Handlers {
    /// A method table with `token.get` only: resource "now" is answered at once (as a cache
    /// hit is), any other resource when `gate` lets it go.
    static func table(gate: Gate) -> MethodTable {
        var table = MethodTable()
        table.add(MethodSpec(.tokenGet, empty: TokenGetParams(), access: .open("a test"),
                             answer: .nowOrLater(fast: { $0.resource == "now" ? answer($0) : nil },
                                                 slow: { p in
                                                     await gate.wait(p.resource ?? "")
                                                     return answer(p)
                                                 })))
        return table
    }

    static func answer(_ p: TokenGetParams) -> TokenGetResult {
        TokenGetResult(accessToken: "stub-token", tokenType: "Bearer", expiresAt: 0, scope: nil, resource: p.resource,
                       provider: "corp", account: "alice")
    }

    /// Whoever runs the tests, as SO_PEERCRED would report them.
    static let me: PeerIdentifier = { _ in PeerCredentials.UCred(pid: getpid(), uid: getuid(), gid: getgid()) }

    /// The daemon's pipeline (`BrokerServer.addHandlers`) on `channel`, with `identify`
    /// standing in for SO_PEERCRED, which an embedded channel has not.
    static func install(on pipeline: ChannelPipeline.SynchronousOperations, gate: Gate, identify: @escaping PeerIdentifier = me,
                        activity: ServerActivity = ServerActivity(), maxConnections: Int = 10) throws {
        try BrokerServer.addHandlers(
            to: pipeline, table: table(gate: gate), limits: limits(maxConnections: maxConnections),
            server: server(activity: activity), identify: identify)
    }

    /// The tests' limits: a 5 s stall, a 60 s idle timeout.
    static func limits(maxConnections: Int = 10) -> ConnectionLimits {
        ConnectionLimits(maxConnections: maxConnections, idleTimeout: 60_000_000_000, stallTimeout: 5_000_000_000)
    }

    /// What the tests' connections report to, logging nothing.
    static func server(activity: ServerActivity = ServerActivity(), counters: BrokerCounters = BrokerCounters(),
                       events: EventHub? = nil) -> ServerContext {
        ServerContext(counters: counters, activity: activity, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                      events: events)
    }

    static func request(id: Int?, resource: String) -> String {
        let idMember = id.map { #""id":\#($0),"# } ?? ""
        return #"{"jsonrpc":"2.0",\#(idMember)"method":"token.get","params":{"resource":"\#(resource)"}}"#
    }
}

/// One answer line, read back.
struct Answer {
    let object: [String: Any]

    init(_ buffer: ByteBuffer, file: StaticString = #filePath, line: UInt = #line) throws {
        var buffer = buffer
        let text = buffer.readString(length: buffer.readableBytes) ?? ""
        XCTAssertTrue(text.hasSuffix("\n"), "an answer is one line", file: file, line: line)
        object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], file: file, line: line)
    }

    var id: Int? { object["id"] as? Int }
    var resource: String? { (object["result"] as? [String: Any])?["resource"] as? String }
    var errorCode: Int? { (object["error"] as? [String: Any])?["code"] as? Int }
    var errorMessage: String? { (object["error"] as? [String: Any])?["message"] as? String }
}

extension EmbeddedChannel {
    /// A connected channel running the daemon's pipeline.
    static func daemon(gate: Gate = Gate(), identify: @escaping PeerIdentifier = Handlers.me,
                       activity: ServerActivity = ServerActivity(), maxConnections: Int = 10) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try Handlers.install(on: channel.pipeline.syncOperations, gate: gate, identify: identify, activity: activity,
                             maxConnections: maxConnections)
        try channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket")).wait()
        return channel
    }

    func send(_ text: String) throws {
        var buffer = allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        try writeInbound(buffer)
    }

    /// Every answer written so far.
    func answers() throws -> [Answer] {
        var all: [Answer] = []
        while let buffer = try readOutbound(as: ByteBuffer.self) { all.append(try Answer(buffer)) }
        return all
    }
}
