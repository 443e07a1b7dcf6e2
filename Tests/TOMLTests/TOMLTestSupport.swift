import TOML
import XCTest

extension XCTestCase {
    /// The document's root table; fails the test when it does not parse.
    func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> TOMLTable {
        do {
            return try TOMLTable(parsing: text)
        } catch {
            XCTFail("does not parse: \(error)", file: file, line: line)
            return TOMLTable()
        }
    }

    /// The value of `key` in a one-line document `key = <value>`.
    func value(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> TOMLValue? {
        parse("v = " + text, file: file, line: line)["v"]
    }

    /// The error a document fails with; fails the test when it parses.
    @discardableResult
    func failure(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> TOMLError? {
        do {
            let table = try TOMLTable(parsing: text)
            XCTFail("parses, but should not: \(table.keys)", file: file, line: line)
            return nil
        } catch {
            XCTAssertFalse(error.reason.isEmpty, file: file, line: line)
            return error
        }
    }

    /// Checks that `text` fails at `line`:`column` with a reason that contains `reason`.
    func assertFails(_ text: String, at position: (Int, Int)? = nil, _ reason: String,
                     file: StaticString = #filePath, line: UInt = #line) {
        guard let error = failure(text, file: file, line: line) else { return }
        XCTAssertTrue(error.reason.contains(reason), "\"\(error.reason)\" lacks \"\(reason)\"", file: file, line: line)
        if let (l, c) = position {
            XCTAssertEqual(error.line, l, "line of: \(error)", file: file, line: line)
            XCTAssertEqual(error.column, c, "column of: \(error)", file: file, line: line)
        }
    }
}
