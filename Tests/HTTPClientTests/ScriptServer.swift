import Foundation
import XCTest

/// A Python server from `support/` run for one test: started with its arguments, its port
/// read from its first line of output, stopped by closing its stdin (and, failing that,
/// terminating it).
final class ScriptServer {
    let port: Int
    private let process: Process
    private let input: Pipe

    static let supportDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("support")

    init(_ script: String, arguments: [String] = []) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.supportDirectory.appendingPathComponent(script).path] + arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line: [UInt8] = []
        let handle = output.fileHandleForReading
        while true {
            let byte = handle.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == 0x0A { break }
            line.append(first)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw XCTSkip("\(script) did not start")
        }
        self.port = port
        self.process = process
        self.input = input
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

/// A throw-away CA and server certificates made with the openssl CLI in a temporary
/// folder: `trusted` (for localhost and 127.0.0.1, by the test CA), `wrongName` (for
/// wrong.example, by the test CA), `untrusted` (for localhost and 127.0.0.1, by a
/// second CA no client trusts) and `expired` (for localhost and 127.0.0.1, by the test
/// CA, whose end of validity has passed).
struct TestCertificates {
    let folder: URL
    var caFile: String { folder.appendingPathComponent("ca.pem").path }
    func cert(_ name: String) -> [String] {
        ["--cert", folder.appendingPathComponent("\(name).pem").path, "--key", folder.appendingPathComponent("\(name).key").path]
    }

    static func make() throws -> TestCertificates {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("httpclient-tests-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        func run(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + arguments
            process.currentDirectoryURL = folder
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw XCTSkip("openssl \(arguments.first ?? "") failed") }
        }
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"]
        for ca in ["ca", "otherca"] {
            try run(["req", "-x509"] + key + ["-keyout", "\(ca).key", "-out", "\(ca).pem", "-subj", "/CN=authbroker test \(ca)"])
        }
        let leaves = [("trusted", "ca", "DNS:localhost,IP:127.0.0.1,IP:::1"), ("wrongname", "ca", "DNS:wrong.example"),
                      ("untrusted", "otherca", "DNS:localhost,IP:127.0.0.1")]
        for (name, ca, names) in leaves {
            try run(["req", "-x509"] + key + ["-CA", "\(ca).pem", "-CAkey", "\(ca).key", "-keyout", "\(name).key", "-out", "\(name).pem",
                     "-subj", "/CN=\(name)", "-addext", "subjectAltName=\(names)", "-addext", "basicConstraints=critical,CA:FALSE"])
        }
        // `-days -1`: its validity ended a day before it was made.
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(to: folder.appendingPathComponent("expired.ext"), atomically: true, encoding: .utf8)
        try run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "expired.key", "-out", "expired.csr",
                 "-subj", "/CN=expired"])
        try run(["x509", "-req", "-in", "expired.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-days", "-1", "-extfile", "expired.ext",
                 "-out", "expired.pem"])
        return TestCertificates(folder: folder)
    }
}
