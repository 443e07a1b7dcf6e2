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
        /// stdout and stderr, interleaved.
        var output: String
    }

    /// Runs a program to its end (killed after `timeout` seconds) and returns its output.
    static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        timeout: TimeInterval = 60,
        in directory: URL? = nil
    ) throws -> ProcessOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment {
            process.environment = environment
        }
        if let directory {
            process.currentDirectoryURL = directory
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
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

    /// A sentence for what a test cannot do here, and what to do about it.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs one XCTest method of this test bundle as another uid (setpriv, as root), from a
    /// copy of the bundle in a fresh folder every user can read, removed afterwards: the
    /// clone may sit in a folder other users cannot enter (a `mktemp -d` folder, a 0700 home
    /// directory), from where the child would trap at once (Foundation's Bundle.main reads
    /// the executable's folder). Refused at once with a sentence when a library the bundle
    /// loads (/proc/self/maps: the Swift runtime in its toolchain) is one the uid cannot read.
    static func runTestAsAnotherUser(_ test: String, uid: uid_t, environment: [String: String]) throws -> ProcessOutput {
        guard let setpriv = which("setpriv") else {
            throw Refusal(description: "setpriv (util-linux) is not installed: run scripts/setup")
        }
        let asUser = ["--reuid", "\(uid)", "--regid", "\(uid)", "--clear-groups"]
        let folder = URL(fileURLWithPath: "/tmp/authbroker-for-uid-\(uid)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: folder) }
        let bundle = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let copy = folder.appendingPathComponent(URL(fileURLWithPath: bundle).lastPathComponent).path
        try FileManager.default.copyItem(atPath: bundle, toPath: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy)
        let libraries = try Set(String(contentsOfFile: "/proc/self/maps", encoding: .utf8).split(separator: "\n")
            .compactMap { $0.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true).dropFirst(5).first }
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("/") && $0 != bundle && !$0.hasSuffix("(deleted)") })
        let unreadable = try run(setpriv, asUser + ["/bin/sh", "-c", #"for f; do [ -r "$f" ] || echo "$f"; done"#, "sh", copy]
                                 + libraries.sorted(), in: folder)
        let refused = unreadable.output.split(separator: "\n")
        guard unreadable.status == 0, refused.isEmpty else {
            throw Refusal(description: "uid \(uid) cannot read \(refused.joined(separator: ", ")), which \(test) needs "
                          + "as that user (\(unreadable.output.isEmpty ? "status \(unreadable.status)" : "a folder other users cannot enter")): "
                          + "make it readable by every user (chmod o+rX on the file and its folders), then run the test again")
        }
        return try run(setpriv, asUser + [copy, test], environment: environment, timeout: 120, in: folder)
    }

    /// A new, empty temporary directory (the caller removes it).
    static func makeTemporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("secretstore-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// A private D-Bus session bus that can activate no service at all (its configuration has
/// no `<servicedir>`), optionally with a gnome-keyring of its own, unlocked, in a private
/// home. (A plain `dbus-daemon --session` would not do for "no Secret Service": it reads
/// the standard service directories, where gnome-keyring installs
/// `org.freedesktop.secrets.service`, so the first libsecret call would start a keyring.)
///
/// Both daemons run in the foreground as direct children: Foundation's `Process` on Linux
/// notices that a child exited only when every holder of an inherited descriptor is gone,
/// so waiting for a `--fork`ing daemon never ends while the forked daemon lives.
final class PrivateSession {
    let address: String
    /// HOME, XDG_RUNTIME_DIR, XDG_DATA_HOME and DBUS_SESSION_BUS_ADDRESS of the session.
    let environment: [String: String]
    private let bus: Process
    private var keyring: Process?
    private let directory: URL

    init(withKeyring: Bool) throws {
        guard let dbusDaemon = TestSupport.which("dbus-daemon") else {
            throw XCTSkip("dbus-daemon is not installed")
        }
        directory = try TestSupport.makeTemporaryDirectory()
        let home = directory.appendingPathComponent("home")
        let runtime = directory.appendingPathComponent("run")
        let data = home.appendingPathComponent(".local/share")
        for folder in [home, runtime, data] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: runtime.path)

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

        bus = Process()
        bus.executableURL = URL(fileURLWithPath: dbusDaemon)
        bus.arguments = ["--config-file=\(config.path)", "--nofork", "--print-address=1"]
        let output = Pipe()
        bus.standardOutput = output
        bus.standardError = FileHandle.nullDevice
        bus.standardInput = FileHandle.nullDevice
        try bus.run()

        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // the daemon exited
            printed.append(chunk)
        }
        let line = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard line.hasPrefix("unix:") else {
            bus.terminate()
            throw XCTSkip("could not start a private dbus-daemon (printed \"\(line)\")")
        }
        address = line

        var environment = TestSupport.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = line
        environment["HOME"] = home.path
        environment["XDG_RUNTIME_DIR"] = runtime.path
        environment["XDG_DATA_HOME"] = data.path
        self.environment = environment

        if withKeyring {
            try startKeyring()
        }
    }

    /// gnome-keyring-daemon with only the Secret Service, its login keyring created and
    /// unlocked with a throwaway password read from stdin.
    private func startKeyring() throws {
        do {
            keyring = try KeyringProcess.launch(environment: environment)
        } catch {
            stop()
            throw error
        }
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the keyring: a frozen service gets D-Bus calls
    /// but never answers, like a hung one.
    func freezeKeyring(_ frozen: Bool) {
        guard let keyring else { return }
        _ = frozen ? keyring.suspend() : keyring.resume()
    }

    func stop() {
        freezeKeyring(false)
        for process in [keyring, bus].compactMap({ $0 }) where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        keyring = nil
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

/// A gnome-keyring-daemon in the foreground, as a direct child, with only the Secret
/// Service: its login keyring (in `HOME` of `environment`) created or opened, and unlocked
/// with a throwaway password read from stdin. Started again on the same bus and home, it
/// opens the same keyring file under a new unique bus name, as after a crash.
enum KeyringProcess {
    static let password = "test-password"

    static func launch(environment: [String: String]) throws -> Process {
        guard let daemon = TestSupport.which("gnome-keyring-daemon") else {
            throw XCTSkip("gnome-keyring-daemon is not installed")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: daemon)
        process.arguments = ["--foreground", "--unlock", "--components=secrets"]
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(password.utf8))
        try input.fileHandleForWriting.close()
        guard try waitForOwner(present: true, environment: environment) else {
            process.terminate()
            throw XCTSkip("the private gnome-keyring-daemon did not appear on the bus")
        }
        return process
    }

    /// Waits (up to 20 s) until org.freedesktop.secrets has an owner on the bus, or none;
    /// whether it came to that.
    static func waitForOwner(present: Bool, environment: [String: String]) throws -> Bool {
        guard let gdbus = TestSupport.which("gdbus") else { throw XCTSkip("gdbus is not installed") }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let answer = try TestSupport.run(
                gdbus,
                [
                    "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                    "--method", "org.freedesktop.DBus.NameHasOwner", "org.freedesktop.secrets",
                ],
                environment: environment, timeout: 10
            )
            if answer.output.contains(present ? "true" : "false") { return true }
            usleep(50_000)
        }
        return false
    }

    /// The process id of whoever owns org.freedesktop.secrets on the bus.
    static func ownerPID(environment: [String: String]) throws -> pid_t? {
        guard let gdbus = TestSupport.which("gdbus") else { throw XCTSkip("gdbus is not installed") }
        let answer = try TestSupport.run(
            gdbus,
            [
                "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                "--method", "org.freedesktop.DBus.GetConnectionUnixProcessID", "org.freedesktop.secrets",
            ],
            environment: environment, timeout: 10
        )
        // "(uint32 1234,)"
        let digits = answer.output.split(separator: " ").last?.filter(\.isNumber) ?? ""
        return pid_t(digits)
    }
}
