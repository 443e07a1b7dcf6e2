import Foundation
import XCTest

/// Issue 23's rule for the daemon's shape: no class or actor has more than 25 methods or
/// more than 12 stored properties (`scripts/type-sizes` counts them; structs and enums are
/// exempt). A type that grows past it is split, as `Broker` was into services.
final class TypeSizeTests: XCTestCase {
    func testNoClassOrActorIsOverTheLimits() throws {
        try run("scripts/type-sizes", "--over")
    }

    /// Issue 40's rule: the functions over 60 lines are never more than
    /// `scripts/function-lengths`' baseline (lowered as they are split).
    func testNoNewFunctionOverSixtyLines() throws {
        try run("scripts/function-lengths")
    }

    private func run(_ script: String, _ arguments: String...) throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root.appendingPathComponent(script).path] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, text)
    }
}
