@testable import BrokerServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// The socket folder check (`SocketListener.prepare`) on real files.
final class SocketFolderTests: XCTestCase {
    /// A folder path that is another user's symlink is refused, even when it points at a
    /// private folder of the daemon's user: its owner can point it elsewhere at any time.
    func testAnotherUsersSymlinkAsTheFolderIsRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "making a file another user owns needs root")
        let base = NSTemporaryDirectory() + "socketfolder-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        XCTAssertEqual(mkdir(base, 0o755), 0)
        defer { _ = try? FileManager.default.removeItem(atPath: base) }
        let real = base + "/mine"
        XCTAssertEqual(mkdir(real, 0o700), 0)
        let link = base + "/link"
        XCTAssertEqual(symlink(real, link), 0)
        XCTAssertEqual(lchown(link, 65534, 65534), 0)  // nobody's symlink

        XCTAssertThrowsError(try SocketListener.prepare(path: link + "/socket")) { error in
            XCTAssertTrue("\(error)".contains("symbolic link"), "\(error)")
        }
        // The daemon user's own folder, named directly, is fine.
        XCTAssertNoThrow(try SocketListener.prepare(path: real + "/socket"))
    }
}
