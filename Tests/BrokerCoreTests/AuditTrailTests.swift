@testable import BrokerCore
import BrokerProtocol
import Foundation
import Logging
import Synchronization
import XCTest

/// Issue 38 item 4: the audit trail's lines (one per decision, `key=value` after a stable
/// prefix, read back by `authctl audit`), its rate limit per process, per program and in
/// all with a count of what was not written, and its file (0600, rotated at a cap).
final class AuditTrailTests: XCTestCase {
    private let subject = AuditSubject(method: .tokenGet, provider: "corp", account: "alice", resource: "https://api")
    private let git = AuditProgram(path: "/usr/bin/git", pid: 42, forwarded: false)

    func testALineNamesTheProgramAndTheDecisionAndReadsBack() throws {
        let record = AuditRecord(time: 1_800_000_000.25, decision: "served", method: "token.get", program: "/usr/bin/git", pid: 42,
                                 forwarded: false, provider: "corp", account: "alice", resource: "https://git.example.com",
                                 grant: "rule")
        XCTAssertEqual(record.line,
                       "audit: time=2027-01-15T08:00:00.250Z decision=served method=token.get program=/usr/bin/git pid=42 forwarded=no provider=corp account=alice resource=https://git.example.com grant=rule")
        XCTAssertEqual(AuditRecord(line: Substring(record.line)), record)
        XCTAssertNil(AuditRecord(line: "ready version=1"), "the daemon's other lines are not entries")
    }

    func testValuesThatCouldForgeALineAreQuoted() throws {
        // A program's path is its author's choice: a newline in it must not start a line
        // that reads as an entry of its own.
        let path = "/tmp/x\naudit: time=2027-01-15T08:00:00.000Z decision=served program=/usr/bin/git"
        let record = AuditRecord(time: 1_800_000_000, decision: "refused", program: path, pid: 7, resource: "https://a b\"c\\d=e\u{2028}\u{7}",
                                 reason: "forbidden by policy: /tmp/x may not have tokens")
        let line = record.line
        XCTAssertFalse(line.contains("\n"), line)
        XCTAssertFalse(line.contains("\u{2028}"), line)
        XCTAssertEqual(line.split(separator: "\n").filter { $0.hasPrefix(AuditRecord.prefix) }.count, 1, "one entry only: \(line)")
        XCTAssertEqual(AuditRecord(line: Substring(line)), record)
        XCTAssertTrue(line.contains(#"program="/tmp/x\naudit: time=2027"#), line)
        XCTAssertTrue(line.contains(#"resource="https://a b\"c\\d=e\u2028\x07""#), line)
    }

    func testTheTimeIsUTCToTheMillisecond() {
        XCTAssertEqual(AuditRecord.timestamp(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(AuditRecord.timestamp(1_700_000_000.5), "2023-11-14T22:13:20.500Z")
        XCTAssertEqual(AuditRecord.parseTimestamp("2023-11-14T22:13:20.500Z"), 1_700_000_000.5)
        XCTAssertEqual(AuditRecord.parseTimestamp("2023-11-14T22:13:20Z"), 1_700_000_000)
        XCTAssertNil(AuditRecord.parseTimestamp("2023-11-14 22:13:20Z"))
    }

    func testAFloodOfOneProcessIsCountedNotWrittenAndTheCountFollows() {
        let (trail, sink, clock) = Self.trail(perProgram: 3)
        let looked = Mutex(0)
        for _ in 0..<10 {
            trail.record(.served, subject, grant: .open, pid: 42, resolve: { pid in looked.withLock { $0 += 1 }; return self.git })
        }
        XCTAssertEqual(sink.records.map(\.decision), ["served", "served", "served"])
        XCTAssertEqual(looked.withLock { $0 }, 1, "the program is read once, for the first line, not for each request")
        XCTAssertEqual(sink.records.first?.program, "/usr/bin/git")
        XCTAssertEqual(sink.records.first?.grant, "open")
        clock.advance(61)
        trail.sweep()
        let more = try? XCTUnwrap(sink.records.last)
        XCTAssertEqual(more?.decision, "more")
        XCTAssertEqual(more?.count, 7)
        XCTAssertEqual(more?.program, "/usr/bin/git")
        // A new minute: written again.
        trail.record(.refreshed, subject, grant: .open, pid: 42, resolve: { _ in self.git })
        XCTAssertEqual(sink.records.last?.decision, "refreshed")
    }

    func testAProgramRunAsManyProcessesIsLimitedAsOneProgram() {
        // An agent that runs each command as a new process: each has a pid of its own, the
        // program is one.
        let (trail, sink, clock) = Self.trail(perProgram: 5)
        for pid in Int32(100)..<120 {
            trail.record(.served, subject, grant: .rule, pid: pid, resolve: { AuditProgram(path: "/usr/bin/claude", pid: $0, forwarded: false) })
        }
        trail.record(.served, subject, grant: .rule, pid: 7, resolve: { _ in self.git })
        XCTAssertEqual(sink.records.filter { $0.program == "/usr/bin/claude" }.count, 5)
        XCTAssertEqual(sink.records.filter { $0.program == "/usr/bin/git" }.count, 1, "another program is not crowded out")
        clock.advance(61)
        trail.sweep()
        XCTAssertEqual(sink.records.last?.decision, "more")
        XCTAssertEqual(sink.records.last?.count, 15)
        XCTAssertEqual(sink.records.last?.program, "/usr/bin/claude")
    }

    func testAllProgramsTogetherAreCappedToo() {
        let (trail, sink, _) = Self.trail(perProgram: 5, total: 8)
        for pid in Int32(1)...20 {
            trail.record(.served, subject, pid: pid, resolve: { AuditProgram(path: "/usr/bin/p\($0)", pid: $0, forwarded: false) })
        }
        XCTAssertEqual(sink.records.count, 8)
        trail.flush()
        XCTAssertEqual(sink.records.last?.decision, "more")
        XCTAssertEqual(sink.records.last?.count, 12)
        XCTAssertNil(sink.records.last?.program, "all programs")
    }

    func testNoTokenIsEverInALine() {
        // The trail is given what a decision is about, never the answer: the registrations'
        // subjects hold no token field, and a line is made of them only.
        let (trail, sink, _) = Self.trail()
        trail.record(.leased, subject, grant: .lease(3), seconds: 900, program: git)
        trail.record(.denied, subject, reason: "forbidden by policy: you refused git a token", program: git)
        XCTAssertEqual(sink.records.first?.lease, "3")
        XCTAssertEqual(sink.records.first?.seconds, 900)
        XCTAssertEqual(sink.records.last?.reason, "forbidden by policy: you refused git a token")
    }

    func testTheFileIsPrivateAndRotatedAtItsCap() throws {
        let folder = NSTemporaryDirectory() + "audit-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/state/authbroker/audit.log"
        let sink = AuditFileSink(path: path, maxBytes: 1000, logger: Logger(label: "test"))
        let line = AuditRecord(time: 1_800_000_000, decision: "served", program: "/usr/bin/git", pid: 1).line
        for _ in 0..<20 { sink.write(line) }
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let folderAttributes = try FileManager.default.attributesOfItem(atPath: folder + "/state/authbroker")
        XCTAssertEqual((folderAttributes[.posixPermissions] as? NSNumber)?.intValue, 0o700)
        let current = try String(contentsOfFile: path, encoding: .utf8)
        let previous = try String(contentsOfFile: AuditLog.previous(of: path), encoding: .utf8)
        XCTAssertLessThanOrEqual(current.utf8.count, 1000)
        XCTAssertLessThanOrEqual(previous.utf8.count, 1000)
        XCTAssertGreaterThan(previous.utf8.count, 1000 - line.utf8.count - 1, "rotated only when the next line would not fit")
        XCTAssertTrue((current + previous).split(separator: "\n").allSatisfy { AuditRecord(line: $0) != nil })
    }

    func testTheFileIsWhereAuthctlLooks() {
        XCTAssertEqual(AuditLog.path(environment: { ["XDG_STATE_HOME": "/s", "HOME": "/h"][$0] }), "/s/authbroker/audit.log")
        XCTAssertEqual(AuditLog.path(environment: { ["HOME": "/h"][$0] }), "/h/.local/state/authbroker/audit.log")
        XCTAssertEqual(AuditLog.path(environment: { ["XDG_STATE_HOME": "relative", "HOME": "/h"][$0] }), "/h/.local/state/authbroker/audit.log",
                       "a relative XDG_STATE_HOME is to be ignored (XDG base directories)")
    }

    private static func trail(perProgram: Int = 30, total: Int = 600) -> (AuditTrail, AuditMemorySink, TestClock) {
        let sink = AuditMemorySink()
        let clock = TestClock()
        return (AuditTrail(sink: sink, clock: clock.wallClock, perProgram: perProgram, total: total, sweepsItself: false), sink, clock)
    }
}
