@testable import BrokerCore
import BrokerProtocol
@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import XCTest

/// The front door at its limits, on a real Unix socket: the door's own thread, a client
/// that reads as slowly as it likes.
final class FrontDoorLimitsTests: XCTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "frontdoor-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(folder, 0o700), 0)
    }

    override func tearDown() {
        _ = try? FileManager.default.removeItem(atPath: folder)
    }

    /// A front door whose `token.get` answers at once with an access token of `size` bytes
    /// (as big as a `daemon.status` of many cached tokens); its stall timeout is `stall`.
    private func door(answering size: Int, stall: Double) throws -> (FrontDoor, String) {
        let path = folder + "/socket"
        try SocketListener.prepare(path: path)
        let fd = try SocketListener.listen(path: path)
        var table = MethodTable()
        let big = String(repeating: "a", count: size)
        table.register(.tokenGet, TokenGetParams.self, empty: TokenGetParams(),
                       fast: { _ in TokenGetResult(accessToken: big, tokenType: "Bearer", expiresAt: 0, scope: nil, resource: nil,
                                                   provider: "corp", account: "alice") },
                       slow: { _ throws(BrokerError) in throw BrokerError.internalError("not here") })
        let door = try FrontDoor(
            listening: fd, table: table, counters: BrokerCounters(), activity: ServerActivity(), logger: Logger(label: "test"),
            limits: .init(maxConnections: 10, idleTimeout: 60_000_000_000, stallTimeout: UInt64(stall * 1e9)),
            handOver: { fd, _ in close(fd) })
        try door.start()
        return (door, path)
    }

    private func connect(_ path: String) throws -> FileHandle {
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

    /// The stall is measured from the last progress: a reader that keeps taking bytes,
    /// each bite well within the stall timeout, gets the whole answer however long it
    /// takes in all (here several times the timeout).
    func testASlowReaderThatKeepsTakingBytesGetsTheWholeAnswer() throws {
        let size = 1 << 20
        let (door, path) = try door(answering: size, stall: 1)
        defer { door.stop() }
        let client = try connect(path)
        client.write(Data(#"{"jsonrpc":"2.0","id":1,"method":"token.get"}"#.utf8 + [0x0A]))
        var got = Data()
        while true {
            Thread.sleep(forTimeInterval: 0.25)
            var chunk = [UInt8](repeating: 0, count: 96 * 1024)
            let n = read(client.fileDescriptor, &chunk, chunk.count)
            if n <= 0 { break }
            got.append(contentsOf: chunk[0..<n])
            if got.last == 0x0A { break }
        }
        XCTAssertEqual(got.last, 0x0A, "the answer was cut off after \(got.count) bytes")
        XCTAssertGreaterThan(got.count, size)
    }
}
