@testable import BrokerCore
import BrokerProtocol
@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import XCTest

/// The front door at its limits, on a real Unix socket (`FrontDoorRig`): the door's own
/// thread, a client that reads as slowly as it likes.
final class FrontDoorLimitsTests: XCTestCase {
    /// The stall is measured from the last progress: a reader that keeps taking bytes,
    /// each bite well within the stall timeout, gets the whole answer however long it
    /// takes in all (here several times the timeout).
    func testASlowReaderThatKeepsTakingBytesGetsTheWholeAnswer() throws {
        let size = 1 << 20
        let rig = try FrontDoorRig(answering: size, stall: 1)
        let client = try rig.connect()
        client.send(Data(#"{"jsonrpc":"2.0","id":1,"method":"token.get"}"#.utf8 + [0x0A]))
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
