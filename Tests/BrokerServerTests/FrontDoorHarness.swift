@testable import BrokerCore
import BrokerProtocol
@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import XCTest

/// A front door on a real Unix socket in a private folder, on its own thread as in the
/// daemon, with what it hands to NIO recorded instead (the handed-over socket is closed).
final class FrontDoorRig {
    let folder: String
    let path: String
    let door: FrontDoor
    let activity = ServerActivity()
    /// What the door handed over, in order.
    let handovers = Handovers()
    /// Holds the answers of "later" requests (a refresh in flight) until the test lets them go.
    let work: Latch

    final class Handovers: Sendable {
        private let list = Mutex<[Handover]>([])
        func append(_ handover: Handover) { list.withLock { $0.append(handover) } }
        func withLock<T>(_ body: ([Handover]) -> T) -> T { list.withLock { body($0) } }
    }

    /// - Parameters:
    ///   - size: the length of the access token `token.get` answers with at once, for any
    ///     resource but "later", which is answered later, once `work` is let go (at once
    ///     unless `held`).
    ///   - policy: the `[[allow]]` rules the method table's caller gate holds (none: open).
    ///   - table: the method table instead (a real broker's, `MethodTable.broker`), with its counters.
    init(answering size: Int = 16, idle: Double = 60, stall: Double = 10, policy: CallerPolicy = CallerPolicy(),
         table given: MethodTable? = nil, counters: BrokerCounters = BrokerCounters(),
         held: Bool = false, maxRequestsInFlight: Int = 1024) throws {
        let work = Latch(open: !held)
        self.work = work
        folder = NSTemporaryDirectory() + "frontdoor-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(folder, 0o700), 0)
        path = folder + "/socket"
        try SocketListener.prepare(path: path)
        let fd = try SocketListener.listen(path: path)
        var table = MethodTable(gate: CallerGate(source: FixedPolicy(policy), confirmer: nil, logger: Logger(label: "test")))
        let big = String(repeating: "a", count: size)
        table.add(MethodSpec(.tokenGet, empty: TokenGetParams(), access: .open("a test"),
                       answer: .nowOrLater(fast: { p in
                           p.resource == "later" ? nil
                               : TokenGetResult(accessToken: big, tokenType: "Bearer", expiresAt: 0, scope: nil, resource: p.resource,
                                                provider: "corp", account: "alice")
                       }, slow: { p throws(BrokerError) in
                           await work.wait()
                           return TokenGetResult(accessToken: "later-" + big, tokenType: "Bearer", expiresAt: 0, scope: nil,
                                                 resource: p.resource, provider: "corp", account: "alice")
                       })))
        // A sign-in's wait: cancelled when its caller hangs up, so NIO's.
        table.add(MethodSpec<TokenGetParams, TokenGetResult>(.loginWait, empty: TokenGetParams(), access: .open("a test"), cancelledOnClose: { _ in true },
                             answer: .later { _ throws(BrokerError) in throw BrokerError.internalError("not here") }))
        let handovers = self.handovers
        door = try FrontDoor(
            listening: fd, table: given ?? table,
            limits: .init(maxConnections: 100, idleTimeout: UInt64(idle * 1e9), stallTimeout: UInt64(stall * 1e9),
                          maxRequestsInFlight: maxRequestsInFlight),
            server: ServerContext(counters: counters, activity: activity, logger: Logger(label: "test")),
            handOver: { fd, handover in
                handovers.append(handover)
                close(fd)
            })
        try door.start()
    }

    deinit {
        door.stop()
        _ = try? FileManager.default.removeItem(atPath: folder)
    }

    /// A client's connection to the door.
    func connect() throws -> FileHandle {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let r = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(r, 0)
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    static func request(id: Int, resource: String = "now") -> Data {
        Data(#"{"jsonrpc":"2.0","id":\#(id),"method":"token.get","params":{"resource":"\#(resource)"}}"#.utf8 + [0x0A])
    }
}

/// Holds the rig's answers that come later, as a refresh in flight would, until `release`.
final class Latch: Sendable {
    private let isOpen: Atomic<Bool>
    /// How many answers started waiting.
    let started = Atomic<Int>(0)

    init(open: Bool) { isOpen = Atomic(open) }

    func release() { isOpen.store(true, ordering: .relaxed) }

    func wait() async {
        started.add(1, ordering: .relaxed)
        while !isOpen.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

extension FileHandle {
    /// Writes all of `data` as a client would, stopping where the peer closed: `send` with
    /// MSG_NOSIGNAL, because a daemon that closes first (a handover the rig closes, a limit)
    /// would otherwise kill the whole test process with SIGPIPE (FileHandle.write's write(2)),
    /// as it did in a full run.
    func send(_ data: Data) {
        data.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.send(fileDescriptor, bytes.baseAddress! + done, bytes.count - done, CInt(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                done += n
            }
        }
    }

    /// Reads until `lines` whole lines came or the peer closed (a 10 s receive timeout
    /// guards against a hang: it is no measure of anything).
    func readLines(_ lines: Int) -> [String] {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fileDescriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var got = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var ends = 0
        while ends < lines {
            let n = Glibc.read(fileDescriptor, &chunk, chunk.count)
            if n <= 0 { break }
            ends += chunk[0..<n].count(where: { $0 == 0x0A })
            got.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: got, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Whether the peer closed the connection (read returns 0 or an error) within 10 s.
    func closedByPeer() -> Bool {
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fileDescriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = Glibc.read(fileDescriptor, &chunk, chunk.count)
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return true }
            if n < 0 { return false }
        }
    }
}

extension XCTestCase {
    /// Polls `condition` for up to 10 s (a guard against a hang, not a measure).
    func waitUntil(_ condition: () -> Bool) -> Bool {
        for _ in 0..<200 {
            if condition() { return true }
            usleep(50_000)
        }
        return condition()
    }
}
