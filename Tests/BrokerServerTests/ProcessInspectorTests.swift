@testable import BrokerServer
import BrokerCore
import BrokerProtocol
import Glibc
import XCTest

/// The identification helper (`authbroker-id`) forked for real: it must see exactly what a
/// direct read of /proc sees, say why when it cannot, and be named when it is gone. The
/// test process is not confined, so both ways can be compared.
final class ProcessInspectorTests: XCTestCase {
    func testTheHelperSeesWhatADirectReadSees() throws {
        let helper = try XCTUnwrap(ProcessInspector.start())
        XCTAssertTrue(helper.usesHelper)
        for pid in [getpid(), getppid()] {
            let direct = ProcessInspector.direct.view(of: pid, namespaces: true)
            let through = helper.view(of: pid, namespaces: true)
            XCTAssertNotNil(through.executableID)
            XCTAssertEqual(through.executableID, direct.executableID)
            XCTAssertEqual(through.executable, direct.executable)
            XCTAssertEqual(through.namespaces, direct.namespaces)
            XCTAssertNil(through.failure)
        }
        // Without namespaces asked for: the executable only.
        let quick = helper.view(of: getpid(), namespaces: false)
        XCTAssertEqual(quick.executableID, FileID(path: "/proc/self/exe"))
        XCTAssertNil(quick.namespaces)
        try stop(helper)
    }

    func testAProcessThatIsGoneIsSaidToBeGone() throws {
        let helper = try XCTUnwrap(ProcessInspector.start())
        // A pid past the kernel's limit is nobody.
        let view = helper.view(of: 4_194_304 + 7, namespaces: true)
        XCTAssertNil(view.executableID)
        XCTAssertEqual(view.failure, ENOENT)
        XCTAssertTrue(PeerIdentity.unidentifiedError(view.failure).message.contains("ended before it could be identified"))
        try stop(helper)
    }

    func testAKilledHelperIsNamedNotMistakenForACaller() throws {
        let helper = try XCTUnwrap(ProcessInspector.start())
        let pid = try XCTUnwrap(helper.helperPID)
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        var status: CInt = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        let view = helper.view(of: getpid(), namespaces: false)
        XCTAssertNil(view.executableID)
        XCTAssertEqual(view.failure, ProcessInspector.helperGone)
        let message = PeerIdentity.unidentifiedError(view.failure).message
        XCTAssertTrue(message.contains("identification helper") && message.contains("restart"), message)
        XCTAssertFalse(message.contains("add an [[allow]] rule"), message)
    }

    func testAHiddenCallerIsExplainedNotAskedForARule() {
        let message = PeerIdentity.unidentifiedError(EACCES).message
        XCTAssertTrue(message.contains("cannot identify the program") && message.contains("user namespace"), message)
        XCTAssertFalse(message.contains("add an [[allow]] rule"), message)
    }

    /// Ends the helper the test started and reaps it: closing the daemon's end is what
    /// ends it in the daemon, but the test process lives on.
    private func stop(_ helper: ProcessInspector) throws {
        let pid = try XCTUnwrap(helper.helperPID)
        kill(pid, SIGKILL)
        var status: CInt = 0
        waitpid(pid, &status, 0)
    }
}
