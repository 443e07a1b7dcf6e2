import Glibc
@testable import HTTPClient
import XCTest

/// The sentences and rules of `HostNetwork`, from links and errors given: no test here
/// records links (`HostNetwork.update`), which every other test's connections would read.
final class HostNetworkTests: XCTestCase {
    private let up = HostNetwork.Links(loopbackUp: true, otherRunning: true)

    func testNoRouteIsSaidAsSuchWithTheNextStep() {
        let why = HostNetwork.connectFailure(ENETUNREACH, host: "idp.example.com")
        XCTAssertEqual(why, "this computer has no route to idp.example.com (no network?): connect to a network, or check the routes (ip route)")
        XCTAssertNotNil(HostNetwork.connectFailure(EHOSTUNREACH, host: "idp.example.com"))
        // Refused or timed out: the way is there, the server is not.
        XCTAssertNil(HostNetwork.connectFailure(ECONNREFUSED, host: "idp.example.com"))
        XCTAssertNil(HostNetwork.connectFailure(ETIMEDOUT, host: "idp.example.com"))
    }

    func testAConnectWithoutARouteIsANoNetworkError() {
        guard case .noNetwork(let host, let reason) = Socket.error(ENETUNREACH, host: "idp:8443") else {
            return XCTFail("ENETUNREACH is not .noNetwork")
        }
        XCTAssertEqual(host, "idp:8443")
        XCTAssertTrue(reason.hasPrefix("this computer has no route to idp:8443"), reason)
        XCTAssertEqual(Socket.error(ECONNREFUSED, host: "idp"), .connectionRefused(host: "idp"))
    }

    func testLinksAreReadFromTheirFlags() {
        let lo = UInt32(IFF_UP | IFF_LOOPBACK | IFF_RUNNING)
        let wifi = UInt32(IFF_UP | IFF_RUNNING)
        let cablePulled = UInt32(IFF_UP)  // up, no carrier
        XCTAssertEqual(HostNetwork.Links(flags: [lo, wifi]), up)
        XCTAssertEqual(HostNetwork.Links(flags: [lo, cablePulled]), HostNetwork.Links(loopbackUp: true, otherRunning: false))
        XCTAssertEqual(HostNetwork.Links(flags: [UInt32(IFF_LOOPBACK), wifi]), HostNetwork.Links(loopbackUp: false, otherRunning: true))
    }

    func testALoopbackProviderIsUnreachableOnlyWhileLoIsDown() {
        let loDown = HostNetwork.Links(loopbackUp: false, otherRunning: true)
        let why = HostNetwork.unreachable("127.0.0.1", host: "127.0.0.1:9000", links: loDown) { _ in false }
        XCTAssertEqual(why, "this computer's loopback interface (lo) is down, so nothing reaches 127.0.0.1:9000: bring it up (ip link set lo up)")
        XCTAssertNotNil(HostNetwork.unreachable("::1", host: "[::1]:9000", links: loDown) { _ in false })
        XCTAssertNil(HostNetwork.unreachable("127.0.0.1", host: "127.0.0.1:9000", links: up) { _ in false })
        // Without a network a loopback provider is still there.
        XCTAssertNil(HostNetwork.unreachable("127.0.0.1", host: "127.0.0.1:9000", links: HostNetwork.Links(loopbackUp: true, otherRunning: false)) { _ in false })
    }

    func testWithoutARunningLinkOnlyThisComputersOwnAddressesAreReachable() {
        let offline = HostNetwork.Links(loopbackUp: true, otherRunning: false)
        let why = HostNetwork.unreachable("203.0.113.5", host: "idp.example.com", links: offline) { _ in false }
        XCTAssertEqual(why, "no network interface of this computer is connected (no network?), so idp.example.com cannot be reached: connect to a network")
        XCTAssertNil(HostNetwork.unreachable("192.168.1.5", host: "192.168.1.5", links: offline) { $0 == "192.168.1.5" })
        XCTAssertNil(HostNetwork.unreachable("203.0.113.5", host: "idp.example.com", links: up) { _ in false })
        // Nothing known (a process without the watch): nothing is refused.
        XCTAssertNil(HostNetwork.unreachable("127.0.0.1", host: "127.0.0.1", links: nil) { _ in false })
    }

    func testANameThatDidNotResolveIsNoNetworkOnlyWithoutARouteOff() {
        let why = HostNetwork.lookupFailure(host: "idp.example.com") { _ in false }
        XCTAssertEqual(why, "this computer has no network (no route leads off it), so the name idp.example.com could not be looked up: connect to a network")
        XCTAssertNil(HostNetwork.lookupFailure(host: "idp.example.com") { $0 == AF_INET6 })
        XCTAssertNil(HostNetwork.lookupFailure(host: "idp.example.com") { $0 == AF_INET })
    }

    func testThisComputersLoopbackAddressIsItsOwn() {
        XCTAssertTrue(HostNetwork.isOwn("127.0.0.1"))
        XCTAssertFalse(HostNetwork.isOwn("192.0.2.1"))
    }
}
