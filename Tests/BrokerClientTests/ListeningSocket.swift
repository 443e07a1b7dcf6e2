import Glibc
import XCTest

/// A Unix stream socket bound at `path` and listening: the server side of the client
/// tests' stub daemons. Returns its descriptor.
func listeningSocket(at path: String, backlog: Int32 = 8) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    XCTAssertGreaterThanOrEqual(fd, 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    XCTAssertEqual(bound, 0, "bind \(path)")
    XCTAssertEqual(listen(fd, backlog), 0)
    return fd
}
