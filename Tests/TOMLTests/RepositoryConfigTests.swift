import Foundation
import TOML
import XCTest

/// The configuration files and snippets this repository ships parse.
final class RepositoryConfigTests: XCTestCase {
    /// The repository's root: three folders above this file.
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func testExampleConfigs() throws {
        let examples = root.appendingPathComponent("examples")
        let files = try FileManager.default.contentsOfDirectory(atPath: examples.path).filter { $0.hasSuffix(".toml") }
        XCTAssertFalse(files.isEmpty)
        for name in files {
            let bytes = try [UInt8](Data(contentsOf: examples.appendingPathComponent(name)))
            let table = try TOMLTable(parsingUTF8: bytes)
            XCTAssertNotNil(table["providers"]?.table, name)
        }
        let example = try TOMLTable(parsingUTF8: [UInt8](Data(contentsOf: examples.appendingPathComponent("config.toml"))))
        XCTAssertEqual(example.keys, ["daemon", "providers"])
        XCTAssertEqual(example["daemon"]?.table?["store"], .string("secret-service"))
        XCTAssertEqual(example["providers"]?.table?["corp"]?.table?["scopes"],
                       .array([.string("openid"), .string("profile"), .string("email"), .string("offline_access")]))
    }

    func testSnippetsInTheDocs() throws {
        var count = 0
        for doc in ["docs/configuration.md", "docs/systemd.md", "docs/sign-in.md", "README.md"] {
            let url = root.appendingPathComponent(doc)
            guard let text = try? String(contentsOf: url, encoding: .utf8) else { continue }
            for snippet in Self.tomlBlocks(in: text) {
                count += 1
                XCTAssertNoThrow(try TOMLTable(parsing: snippet), "\(doc): \(snippet)")
            }
        }
        XCTAssertGreaterThan(count, 1)
    }

    /// The text of each ```toml block (indented ones too, as in README's numbered list).
    static func tomlBlocks(in markdown: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        var indent = 0
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop(while: { $0 == " " })
            if current == nil, trimmed.hasPrefix("```toml") {
                current = []
                indent = line.count - trimmed.count
            } else if let lines = current, trimmed.hasPrefix("```") {
                blocks.append(lines.joined(separator: "\n"))
                current = nil
            } else if current != nil {
                current?.append(line.dropFirst(min(indent, line.prefix(while: { $0 == " " }).count)))
            }
        }
        return blocks
    }
}
