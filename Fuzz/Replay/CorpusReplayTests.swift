import Foundation
import XCTest

/// Every input of the fuzz corpora goes through the same property checks the libFuzzer
/// targets make (Fuzz/Properties), on each `swift test`: a change that breaks a property
/// on a kept input fails here without a fuzzing run. Long fuzzing, which finds new inputs,
/// is `scripts/fuzz` (docs/testing.md).
final class CorpusReplayTests: XCTestCase {
    /// Fuzz/<name>, beside this file's folder.
    private func corpus(_ name: String) throws -> [(name: String, bytes: [UInt8])] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(name)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        XCTAssertFalse(names.isEmpty, "Fuzz/\(name) is empty")
        return try names.map { ($0, [UInt8](try Data(contentsOf: folder.appendingPathComponent($0)))) }
    }

    func testRequestDecodingCorpus() throws {
        for input in try corpus("corpus") {
            let problem = input.bytes.withUnsafeBytes { rpcInputProblem($0) }
            XCTAssertNil(problem, "Fuzz/corpus/\(input.name)")
        }
    }

    func testHTTPResponseCorpus() throws {
        for input in try corpus("http-corpus") {
            XCTAssertNil(httpInputProblem(input.bytes), "Fuzz/http-corpus/\(input.name)")
        }
    }

    func testRedirectRequestHeadCorpus() throws {
        for input in try corpus("redirect-corpus") {
            XCTAssertNil(redirectInputProblem(input.bytes), "Fuzz/redirect-corpus/\(input.name)")
        }
    }

    func testTOMLCorpus() throws {
        for input in try corpus("toml-corpus") {
            XCTAssertNil(tomlInputProblem(input.bytes), "Fuzz/toml-corpus/\(input.name)")
        }
    }
}
