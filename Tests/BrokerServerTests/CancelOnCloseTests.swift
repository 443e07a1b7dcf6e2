@testable import BrokerServer
import BrokerCore
import BrokerProtocol
import Logging
import NIOCore
import NIOEmbedded
import XCTest

/// Work registered `cancelledOnClose` (login.wait) ends when its connection closes; other
/// work (a refresh that must store its rotated token) does not.
final class CancelOnCloseTests: XCTestCase {
    /// What the slow methods saw: cancelled or let through.
    actor Seen {
        private(set) var cancelled: [String] = []
        private(set) var finished: [String] = []
        func record(_ method: String, cancelled wasCancelled: Bool) {
            if wasCancelled { cancelled.append(method) } else { finished.append(method) }
        }
    }

    func testOnlyTheWaitIsCancelledWhenThePeerHangsUp() async throws {
        let seen = Seen()
        let gate = Gate()
        var table = MethodTable()
        table.add(MethodSpec(.loginWait, empty: LoginWaitParams(), access: .open("a test"), cancelledOnClose: { _ in true }, answer: .later { _ throws(BrokerError) -> LoginWaitResult in
            try? await Task.sleep(for: .seconds(60))
            await seen.record("login.wait", cancelled: Task.isCancelled)
            throw BrokerError.loginFailed(provider: "corp", message: "cancelled")
        }))
        table.add(MethodSpec(.tokenGet, empty: TokenGetParams(), access: .open("a test"), answer: .later { p throws(BrokerError) in
            await gate.wait("slow")
            await seen.record("token.get", cancelled: Task.isCancelled)
            return Handlers.answer(p)
        }))
        let channel = EmbeddedChannel()
        try BrokerServer.addHandlers(
            to: channel.pipeline.syncOperations, table: table, limits: Handlers.limits(), server: Handlers.server(),
            identify: Handlers.me)
        try await channel.connect(to: SocketAddress(unixDomainSocketPath: "/stub/socket")).get()
        try channel.send(#"{"jsonrpc":"2.0","id":1,"method":"login.wait","params":{"login_id":"x"}}"# + "\n"
            + Handlers.request(id: 2, resource: "slow") + "\n")
        while await gate.arrived.isEmpty { await Task.yield() }

        try await channel.close()
        await gate.open("slow")
        for _ in 0..<500 where await seen.cancelled.count + seen.finished.count < 2 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let cancelled = await seen.cancelled, finished = await seen.finished
        XCTAssertEqual(cancelled, ["login.wait"])
        XCTAssertEqual(finished, ["token.get"])
    }
}
