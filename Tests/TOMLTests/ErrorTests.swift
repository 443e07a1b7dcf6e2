import TOML
import XCTest

/// What TOML 1.0 forbids is refused, at the right line and column, and no message ever
/// holds the text of a value.
final class ErrorTests: XCTestCase {
    func testMessageShape() throws {
        let error = try XCTUnwrap(failure("a = 1\nb = 2\n\n   secret = \"abc"))
        XCTAssertEqual(error.line, 4)
        XCTAssertEqual(error.column, 13)
        XCTAssertTrue(error.description.hasPrefix("line 4, column 13: a string is not closed"), error.description)
    }

    func testMessagesNeverQuoteTheValue() {
        let secret = "s3cr3tV4lu3"
        let documents = [
            "secret = \"\(secret)", "secret = '\(secret)", "secret = \"\"\"\(secret)", "secret = '''\(secret)",
            "secret = \"\(secret)\\q\"", "secret = \"\(secret)\\u12\"", "secret = \"\(secret)\\uD800\"",
            "secret = \"\(secret)\u{7}\"", "secret = '\(secret)\u{7F}'", "secret = \"\(secret)\" trailing",
            "secret = \(secret)", "secret = 0x\(secret)", "secret = 1\(secret)", "secret = 1.\(secret)", "secret = 1979-\(secret)",
            "secret = [\"\(secret)\"", "secret = { k = \"\(secret)\"", "secret = { k = \"\(secret)\" ", "secret = { k = \"\(secret)\",}",
            "secret = \"\(secret)\"\nsecret = \"\(secret)\"", "secret = \"\(secret)\"\n[secret]",
            "secret = [\"\(secret)\" \"\(secret)\"]", "secret . \"\(secret)\"", "secret.\(secret)", "secret.\(secret) x = 1", "secret = \"\(secret)\" # \u{1}",
        ]
        for document in documents {
            guard let error = failure(document) else { continue }
            XCTAssertFalse(error.description.contains(secret), "\(error) quotes the value of \(document.debugDescription)")
            XCTAssertFalse(error.description.contains("s3cr"), "\(error)")
        }
        // The brief's own example.
        let error = failure("secret = \"abc")
        XCTAssertEqual(error?.description.contains("abc"), false)
        XCTAssertEqual(error?.reason.contains("is not closed"), true)
    }

    // MARK: Strings

    func testUnclosedStrings() {
        assertFails("a = \"abc", at: (1, 5), "a string is not closed")
        assertFails("a = \"abc\nb = 1", at: (1, 5), "a string is not closed")
        assertFails("a = 'abc", at: (1, 5), "a string is not closed")
        assertFails("a = 'abc\n'", at: (1, 5), "a string is not closed")
        assertFails("a = \"\"\"abc\n\ndef", at: (1, 5), "a multi-line string is not closed: end it with \"\"\"")
        assertFails("a = '''abc", at: (1, 5), "a multi-line string is not closed: end it with '''")
        assertFails("a = \"abc\\", at: (1, 5), "not closed")
        assertFails("a = \"\"\"a\"\"\"\"\"\"", at: (1, 14), "must be followed by the end of the line")
    }

    func testBadEscapes() {
        assertFails(#"a = "x\qy""#, at: (1, 7), "unknown escape")
        assertFails(#"a = "\e""#, "unknown escape")  // \e is TOML 1.1
        assertFails(#"a = "\x41""#, "unknown escape")
        assertFails(#"a = "\ ""#, "unknown escape")
        assertFails(#"a = "\u12""#, at: (1, 6), "4 hexadecimal digits")
        assertFails(#"a = "\u12G4""#, "4 hexadecimal digits")
        assertFails(#"a = "\U0001F60""#, "\\U escape 8")
        assertFails(#"a = "\uD800""#, at: (1, 6), "not a Unicode scalar value")
        assertFails(#"a = "\uDFFF""#, "not a Unicode scalar value")
        assertFails(#"a = "\U00110000""#, "not a Unicode scalar value")
        assertFails(#"a = "\UFFFFFFFF""#, "not a Unicode scalar value")
        assertFails("a = \"\"\"\\q\"\"\"", "unknown escape")
        assertFails("a = \"\"\"x\\  y\"\"\"", "unknown escape")  // a backslash and spaces not ending the line
    }

    func testControlCharactersAreRefused() {
        for c in [0x00, 0x01, 0x08, 0x0B, 0x0C, 0x1F, 0x7F].map({ String(UnicodeScalar(UInt8($0))) }) {
            assertFails("a = \"x\(c)\"", at: (1, 7), "a string holds a control character")
            assertFails("a = 'x\(c)'", at: (1, 7), "control character")
            assertFails("a = \"\"\"x\(c)\"\"\"", at: (1, 9), "control character")
            assertFails("a = '''x\(c)'''", at: (1, 9), "control character")
            assertFails("a = 1 # x\(c)", at: (1, 10), "a comment holds a control character")
        }
        assertFails("a = \"\r\"", "not closed")
        assertFails("a = \"\"\"x\ry\"\"\"", at: (1, 9), "a carriage return must be followed by a line feed")
        assertFails("a = 1\rb = 2", at: (1, 6), "carriage return")
        assertFails("a = 1 # x\rb = 2", at: (1, 10), "carriage return")
        assertFails("\u{0}a = 1", at: (1, 1), "expected a key")
        XCTAssertEqual(value("\"a\tb\" # tab\there"), .string("a\tb"))
    }

    // MARK: Numbers

    func testBadIntegers() {
        assertFails("a = 01", at: (1, 5), "cannot start with 0")
        assertFails("a = -01", "cannot start with 0")
        assertFails("a = 0_0", "cannot start with 0")
        assertFails("a = 1__000", "underscore")
        assertFails("a = _1000", "not valid")
        assertFails("a = 1000_", "underscore")
        assertFails("a = 0x_1F", "underscore")
        assertFails("a = 0x1F_", "underscore")
        assertFails("a = +0x1F", "cannot have a sign")
        assertFails("a = -0b1", "cannot have a sign")
        assertFails("a = 0X1F", "not valid")
        assertFails("a = 0B1", "not valid")
        assertFails("a = 0o8", "digit its base")
        assertFails("a = 0b102", "digit its base")
        assertFails("a = 0xG", "digit its base")
        assertFails("a = 0x", "not valid")
        assertFails("a = 9223372036854775808", at: (1, 5), "does not fit in 64 bits")
        assertFails("a = -9223372036854775809", "does not fit in 64 bits")
        assertFails("a = 0x8000000000000000", "does not fit in 64 bits")
        assertFails("a = 0o1777777777777777777777", "does not fit in 64 bits")
        assertFails("a = 1 2", at: (1, 7), "must be followed by the end of the line")
        assertFails("a = 1-2", "not valid")
        assertFails("a = +", "not valid")
        // Each must fail on its own (after toml-test's invalid/integer cases).
        for text in ["01", "00", "0_0", "-01", "+01", "+0_1", "++99", "--99", "-0xff", "-0b11010110", "-0o755", "+0xff",
                     "+0b11010110", "+0o755", "123_", "_123", "1__23", "0x_1", "0o_1", "0b_1", "0x1_", "0o1_", "0b1_",
                     "_0x1", "_0o1", "_0b1", "0xaafz", "0o778", "0b0012", "0X1", "0O0", "0B0", "0o", "0b"] {
            XCTAssertNotNil(failure("n = " + text), text)
        }
    }

    func testBadFloats() {
        assertFails("a = .7", at: (1, 5), "not valid")
        assertFails("a = 7.", "a float is not valid")
        assertFails("a = 3.e+20", "a float is not valid")
        assertFails("a = 1e", "a float is not valid")
        assertFails("a = 1e+", "a float is not valid")
        assertFails("a = 1.2.3", "a float is not valid")
        assertFails("a = 03.14", "cannot start with 0")
        assertFails("a = 1._2", "underscore")
        assertFails("a = 1_.2", "underscore")
        assertFails("a = 1e_2", "underscore")
        assertFails("a = 1.2e3.4", "a float is not valid")
        assertFails("a = 1e400", "too large for 64 bits")
        assertFails("a = infinity", "not valid")
        assertFails("a = NaN", "not valid")
        assertFails("a = Inf", "not valid")
        assertFails("a = --1", "not valid")
    }

    func testBadBooleansAndBareWords() {
        assertFails("a = True", at: (1, 5), "put strings in quotes")
        assertFails("a = truee", "put strings in quotes")
        assertFails("a = yes", "put strings in quotes")
        assertFails("a = abc", "put strings in quotes")
        assertFails("a = @x", "put strings in quotes")
        assertFails("a = true false", "must be followed by the end of the line")
    }

    func testBadDateTimes() {
        for text in ["1979-13-01", "1979-00-10", "1979-02-30", "1900-02-29", "1979-05-32", "1979-05-27T24:00:00",
                     "1979-05-27T23:60:00", "1979-05-27T23:59:61", "1979-05-27T07:32:00+24:00", "1979-05-27T07:32:00+01:60",
                     "25:00:00", "1979-5-27", "1979-05-7", "79-05-27", "1979-05-27T07:32", "07:32", "1979-05-27T7:32:00",
                     "1979-05-27T07:32:00.", "1979-05-27T07:32:00+0100", "1979-05-27T07:32:00Zx", "1979-05-27X07:32:00",
                     "1979-05-27T07:32:00 Z", "1979-05-27_07:32:00", "07:32:00Z", "07:32:00+01:00"] {
            guard let error = failure("d = " + text) else { continue }
            XCTAssertTrue(error.reason.contains("not valid") || error.reason.contains("must be followed by the end of the line"), "\(text): \(error)")
            XCTAssertEqual(error.line, 1)
        }
        assertFails("d = 1979-02-30", at: (1, 5), "a date or time is not valid")
    }

    // MARK: Structure

    func testMissingAndMisplacedValues() {
        assertFails("a =", at: (1, 4), "the value of a is missing")
        assertFails("a = # comment", at: (1, 5), "the value of a is missing")
        assertFails("a =\n1", at: (1, 4), "the value of a is missing")
        assertFails("a", at: (1, 2), "expected = after the key a")
        assertFails("a b = 1", at: (1, 3), "expected = after the key a")
        assertFails("= 1", at: (1, 1), "expected a key")
        assertFails("a.= 1", at: (1, 3), "expected a key")
        assertFails(".a = 1", at: (1, 1), "expected a key")
        assertFails("a..b = 1", at: (1, 3), "expected a key")
        assertFails("a.b c = 1", at: (1, 5), "expected = after the key a.…")
        assertFails("ké = 1", at: (1, 2), "expected = after the key k")
        assertFails("\"\"\"a\"\"\" = 1", at: (1, 1), "a key cannot be a multi-line string")
        assertFails("'''a''' = 1", "a key cannot be a multi-line string")
        assertFails("a = 1 b = 2", at: (1, 7), "a value must be followed by the end of the line")
        assertFails("a = \"x\"y", at: (1, 8), "must be followed by the end of the line")
    }

    func testBadHeaders() {
        assertFails("[a", at: (1, 3), "a table header must end with ]")
        assertFails("[a\nb = 1", at: (1, 3), "a table header must end with ]")
        assertFails("[]", at: (1, 2), "expected a key")
        assertFails("[a.]", "expected a key")
        assertFails("[[a]", at: (1, 4), "an array-of-tables header must end with ]]")
        assertFails("[[a] ]", "an array-of-tables header must end with ]]")
        assertFails("[ [a]]", "expected a key")
        assertFails("[a]]", at: (1, 4), "a table header must be followed by the end of the line")
        assertFails("[a] b = 1", at: (1, 5), "a table header must be followed by the end of the line")
        assertFails("[\"\"\"a\"\"\"]", "multi-line")
    }

    func testBadArrays() {
        assertFails("a = [1, 2", at: (1, 5), "an array is not closed")
        assertFails("a = [1,\n2,\n", at: (1, 5), "an array is not closed")
        assertFails("a = [1 2]", at: (1, 8), "must be separated by commas")
        assertFails("a = [,]", at: (1, 6), "a comma with no value before it")
        assertFails("a = [1,,2]", at: (1, 8), "a comma with no value before it")
        assertFails("a = [1\n,\n,]", at: (3, 1), "a comma with no value before it")
        assertFails("a = [1 # x\r]", "carriage return")
    }

    func testBadInlineTables() {
        assertFails("a = {", at: (1, 5), "an inline table is not closed")
        assertFails("a = { b = 1", at: (1, 5), "an inline table is not closed")
        assertFails("a = { b = 1,\n c = 2 }", at: (1, 13), "an inline table must be on one line")
        assertFails("a = {\n}", at: (1, 6), "on one line")
        assertFails("a = { b = 1 # c\n}", "on one line")
        assertFails("a = { b = 1, }", at: (1, 14), "cannot end with a comma")
        assertFails("a = { , }", "expected a key")
        assertFails("a = { b = 1 c = 2 }", at: (1, 13), "separated by commas")
        assertFails("a = { b = }", "the value of a.b is missing")
        assertFails("a = { b }", "expected = after the key b")
    }

    // MARK: Bytes

    func testCRLFAndBOM() {
        XCTAssertEqual(parse("a = 1\r\n[t]\r\nb = \"x\" # c\r\n"), ["a": .integer(1), "t": .table(["b": .string("x")])])
        XCTAssertEqual(parse("\u{FEFF}a = 1"), ["a": .integer(1)])
        assertFails("\u{FEFF}a = 1\na = 2", at: (2, 1), "defined twice")
        assertFails("\u{FEFF}x = \"", at: (1, 5), "not closed")
        assertFails("a = 1\n\u{FEFF}b = 2", at: (2, 1), "expected a key")
    }

    func testBytesMustBeUTF8() throws {
        XCTAssertEqual(try TOMLTable(parsingUTF8: Array("\u{FEFF}a = \"é\"".utf8)), ["a": .string("é")])
        for bad: [UInt8] in [[0xFF], [0xC3], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80]] {
            XCTAssertThrowsError(try TOMLTable(parsingUTF8: Array("a = 1\nb = \"x".utf8) + bad + Array("\"".utf8))) { error in
                let e = error as? TOMLError
                XCTAssertEqual(e?.line, 2)
                XCTAssertEqual(e?.column, 7)
                XCTAssertEqual(e?.reason.contains("not valid UTF-8"), true)
            }
        }
    }

    func testColumnsCountCharactersNotBytes() {
        assertFails("\"ü\" = 1\n\"ü\" = 2", at: (2, 1), "defined twice")
        assertFails("a = \"ü€😀\" x", at: (1, 11), "must be followed by the end of the line")
        assertFails("a = 1\t\tb", at: (1, 8), "must be followed by the end of the line")
    }
}
