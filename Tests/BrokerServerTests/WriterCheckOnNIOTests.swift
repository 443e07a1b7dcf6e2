import BrokerCore
import Foundation
@testable import BrokerServer
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization
import XCTest

/// `WriterCheck` on NIO's real socket channel, over a socket pair: the check relies on NIO
/// asking the channel's receive allocator for the next buffer's size right before each
/// read(2) (`PeekingAllocator.nextBufferSize`). These tests fail when NIO changes that
/// order: asked after a read (when the queue is empty) instead of before the next, the
/// connecting process's second request would be refused; not asked at all, its first.
final class WriterCheckOnNIOTests: XCTestCase {
    /// Lines that passed the check, and whether the connection was closed.
    final class Seen: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let lines = Mutex<[String]>([])
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let text = String(buffer: unwrapInboundIn(data))
            lines.withLock { $0.append(text) }
        }
        var count: Int { lines.withLock { $0.count } }
    }

    private var group: MultiThreadedEventLoopGroup?
    private var writer: CInt = -1

    override func tearDown() {
        if writer >= 0 { close(writer) }
        try? group?.syncShutdownGracefully()
    }

    /// A channel on the reading end of a socket pair with the check installed for this
    /// process; returns what passed it.
    private func channel() throws -> Seen {
        var fds: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw XCTSkip("no socketpair") }
        var on: CInt = 1
        XCTAssertEqual(setsockopt(fds[1], SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<CInt>.size)), 0)
        writer = fds[0]
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.group = group
        let seen = Seen()
        let reader = fds[1]
        let installed = Mutex(false)
        _ = try ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(seen)
                    let ok = WriterCheck.install(on: channel, descriptor: reader, pid: getpid(), uid: getuid(),
                                                 logger: Logger(label: "test"), counters: BrokerCounters(), codec: RPCCodec())
                    installed.withLock { $0 = ok }
                }
            }
            .withConnectedSocket(reader).wait()
        XCTAssertTrue(installed.withLock { $0 })
        return seen
    }

    private func send(_ text: String) {
        XCTAssertEqual(text.utf8CString.withUnsafeBufferPointer { write(writer, $0.baseAddress, text.utf8.count) }, text.utf8.count)
    }

    /// What the daemon wrote back, up to its close.
    private func answer() -> String {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(writer, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var got = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(writer, &chunk, chunk.count)
            if n <= 0 { break }
            got.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: got, as: UTF8.self)
    }

    func testEveryReadOfTheConnectingProcessPassesOneAfterAnother() throws {
        let seen = try channel()
        // Each request is read before the next is sent: the queue is empty between reads,
        // so only a peek right before each read names its writer.
        for i in 1...3 {
            send("request \(i)\n")
            XCTAssertTrue(waitUntil { seen.count == i }, "request \(i) of the connecting process was refused")
        }
        XCTAssertEqual(seen.lines.withLock { $0 }, ["request 1\n", "request 2\n", "request 3\n"])
    }

    func testAChildsBytesAreRefusedAndTheConnectionClosed() throws {
        let seen = try channel()
        send("mine\n")
        XCTAssertTrue(waitUntil { seen.count == 1 })
        let child = fork()
        if child == 0 {
            _ = "child's\n".utf8CString.withUnsafeBufferPointer { write(writer, $0.baseAddress, 8) }
            _exit(0)
        }
        var status: CInt = 0
        waitpid(child, &status, 0)
        let refusal = answer()
        // The same answer, one line, as the guard's own encoder wrote before the check used
        // the connection's codec (the order of members is JSONEncoder's, compared as JSON).
        XCTAssertTrue(refusal.hasSuffix("}\n") && refusal.filter { $0 == "\n" }.count == 1, refusal)
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data(refusal.utf8)) as? NSDictionary, try JSONSerialization.jsonObject(with: Data(
            #"{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"forbidden by policy: this request was written by process \#(child), another process than the one that opened the connection (pid \#(getpid())); the connection is closed: let the program that asks open its own connection"}}"#.utf8)) as? NSDictionary)
        XCTAssertEqual(seen.count, 1, "the child's bytes reached the handlers")
    }
}
