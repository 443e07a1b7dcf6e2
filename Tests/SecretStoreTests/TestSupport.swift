import Foundation
import XCTest

@testable import SecretStore

/// Helpers for the Secret Service tests: child processes, private D-Bus buses, assertions.
enum TestSupport {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// The keyring tests run when the runner says a keyring is required
    /// (`AUTHBROKER_TEST_REQUIRE_KEYRING=1`, then a missing bus is a failure) or when a
    /// session bus is there at all; otherwise they are skipped.
    static func skipUnlessKeyring() throws {
        if environment["AUTHBROKER_TEST_REQUIRE_KEYRING"] != "1" && environment["DBUS_SESSION_BUS_ADDRESS"] == nil {
            throw XCTSkip("no DBUS_SESSION_BUS_ADDRESS: run the tests inside scripts/with-keyring (or set AUTHBROKER_TEST_REQUIRE_KEYRING=1)")
        }
    }

    /// The absolute path of a program on PATH, or nil.
    static func which(_ program: String) -> String? {
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
        }
        return nil
    }

    struct ProcessOutput {
        var status: Int32
        /// stdout and stderr, interleaved (stdout only when stderr was discarded).
        var output: String
    }

    /// Runs a program to its end (killed after `timeout` seconds) and returns its output.
    static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        discardStandardError: Bool = false,
        timeout: TimeInterval = 60
    ) throws -> ProcessOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment {
            process.environment = environment
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        // A daemon that forks keeps the file descriptors it was given: reading to the end
        // of a pipe it holds would never finish.
        process.standardError = discardStandardError ? FileHandle.nullDevice : pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        return ProcessOutput(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    /// Runs one XCTest method of this test bundle in a child process (the bundle is an
    /// executable on Linux that takes `Module.Class/method` as a filter).
    ///
    /// libsecret connects to the session bus once per process and keeps that connection,
    /// so tests about another bus (or no bus) must run in a process of their own.
    static func runTestInChildProcess(_ test: String, environment: [String: String]) throws -> ProcessOutput {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return try run(executable, [test], environment: environment, timeout: 120)
    }

    /// A new, empty temporary directory (the caller removes it).
    static func makeTemporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("secretstore-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// A private D-Bus session bus that can activate no service at all: its configuration has
/// no `<servicedir>`. (A plain `dbus-daemon --session` is not enough: it reads the standard
/// service directories, where gnome-keyring installs `org.freedesktop.secrets.service`,
/// so the first libsecret call would start a keyring.)
final class BareBus {
    let address: String
    private let pid: pid_t
    private let directory: URL

    init() throws {
        guard let daemon = TestSupport.which("dbus-daemon") else {
            throw XCTSkip("dbus-daemon is not installed")
        }
        directory = try TestSupport.makeTemporaryDirectory()
        let config = directory.appendingPathComponent("bare-session.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>unix:dir=\(directory.path)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
            <allow own="*"/>
          </policy>
        </busconfig>
        """.write(to: config, atomically: true, encoding: .utf8)
        // dbus-daemon --fork closes stdout after printing but keeps stderr open.
        let started = try TestSupport.run(
            daemon, ["--config-file=\(config.path)", "--fork", "--print-address=1", "--print-pid=1"],
            discardStandardError: true, timeout: 20
        )
        let lines = started.output.split(separator: "\n").map(String.init)
        guard started.status == 0, lines.count >= 2, let pid = pid_t(lines[1]) else {
            throw XCTSkip("could not start a private dbus-daemon: \(started.output)")
        }
        address = lines[0]
        self.pid = pid
    }

    func stop() {
        kill(pid, SIGTERM)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Asserts that `body` throws exactly `expected`.
func assertThrows<T>(
    _ expected: StoreError,
    _ body: () async throws(StoreError) -> T,
    file: StaticString = #filePath,
    line: UInt = #line
) async {
    do {
        let value = try await body()
        XCTFail("expected \(expected), got a result: \(value)", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}
