@testable import BrokerServer
import Glibc
import XCTest

/// The kernel's record of who wrote each message, read on real socket pairs: the part of
/// `WriterCheck` that does not need a daemon (test_policy_sender.py has the rest).
final class WriterCheckTests: XCTestCase {
    private var ends: [CInt] = []

    override func tearDown() {
        for fd in ends { close(fd) }
        ends = []
    }

    /// A connected pair: (writer's end, reader's end), the reader with SO_PASSCRED when asked.
    private func pair(passCredentials: Bool) throws -> (CInt, CInt) {
        var fds: [CInt] = [-1, -1]
        guard socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw XCTSkip("no socketpair") }
        ends += fds
        if passCredentials {
            var on: CInt = 1
            XCTAssertEqual(setsockopt(fds[1], SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<CInt>.size)), 0)
        }
        return (fds[0], fds[1])
    }

    private func send(_ text: String, on fd: CInt) {
        XCTAssertEqual(text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }, text.utf8.count)
    }

    /// Writes `text` from a child process, which exits at once.
    private func sendFromChild(_ text: String, on fd: CInt) -> Int32 {
        let child = fork()
        if child == 0 {
            _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }
            _exit(0)
        }
        var status: CInt = 0
        waitpid(child, &status, 0)
        return child
    }

    private func readAll(_ fd: CInt) -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = recv(fd, &buffer, buffer.count, CInt(MSG_DONTWAIT))
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
    }

    func testThePeekNamesTheWriterOfEachReadAndTakesNothing() throws {
        let (writer, reader) = try pair(passCredentials: true)
        send("mine", on: writer)
        let child = sendFromChild("child's", on: writer)
        send("mine again", on: writer)
        guard case .writer(let pid, let uid) = PeerCredentials.firstWriter(reader) else { return XCTFail("no writer") }
        XCTAssertEqual(pid, getpid())
        XCTAssertEqual(uid, getuid())
        // The peek took nothing, and a read stops where another writer's bytes begin.
        XCTAssertEqual(readAll(reader), "mine")
        guard case .writer(let second, _) = PeerCredentials.firstWriter(reader) else { return XCTFail("no writer") }
        XCTAssertEqual(second, child)
        XCTAssertEqual(readAll(reader), "child's")
        XCTAssertEqual(readAll(reader), "mine again")
        guard case .empty = PeerCredentials.firstWriter(reader) else { return XCTFail("not empty") }
    }

    func testASocketWithoutPassCredSaysSo() throws {
        let (writer, reader) = try pair(passCredentials: false)
        send("x", on: writer)
        guard case .noCredentials = PeerCredentials.firstWriter(reader) else { return XCTFail("credentials without SO_PASSCRED") }
    }

    func testTheGateLetsThroughOnlyTheConnectingProcessAndOnlyAfterAPeek() throws {
        let (writer, reader) = try pair(passCredentials: true)
        let gate = WriterGate(fd: reader, pid: getpid(), uid: getuid())
        send("mine", on: writer)
        gate.peek()
        guard case .connecting = gate.take() else { return XCTFail("own bytes refused") }
        // A chunk no peek preceded is nobody's.
        guard case .unknown = gate.take() else { return XCTFail("a verdict used twice") }
        _ = readAll(reader)
        let child = sendFromChild("child's", on: writer)
        gate.peek()
        guard case .other(let pid) = gate.take() else { return XCTFail("a child's bytes let through") }
        XCTAssertEqual(pid, child)
        _ = readAll(reader)
        gate.peek()
        guard case .unknown = gate.take() else { return XCTFail("an empty queue named a writer") }
    }

    func testTheGateSwitchesPassCredOnForAConnectionQueuedWithoutIt() throws {
        // Bytes sent before SO_PASSCRED was on carry no writer: refused, not guessed.
        let (writer, reader) = try pair(passCredentials: false)
        send("early", on: writer)
        let gate = WriterGate(fd: reader, pid: getpid(), uid: getuid())
        gate.peek()
        guard case .unknown = gate.take() else { return XCTFail("bytes without a writer let through") }
        _ = readAll(reader)
        // ...and from then on the kernel names the writer.
        send("later", on: writer)
        gate.peek()
        guard case .connecting = gate.take() else { return XCTFail("own bytes refused after SO_PASSCRED") }
    }
}
