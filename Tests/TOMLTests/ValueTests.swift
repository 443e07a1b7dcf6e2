import TOML
import XCTest

/// Every kind of value TOML 1.0 has, read right.
final class ValueTests: XCTestCase {
    // MARK: Strings

    func testBasicStringsAndEveryEscape() {
        XCTAssertEqual(value(#""hello""#), .string("hello"))
        XCTAssertEqual(value(#""""#), .string(""))
        XCTAssertEqual(value(#""a\bb\tc\nd\fe\rf\"g\\h""#), .string("a\u{8}b\tc\nd\u{C}e\rf\"g\\h"))
        XCTAssertEqual(value(#""\u00E9\u20AC\U0001F600""#), .string("é€😀"))
        XCTAssertEqual(value(#""\u0000""#), .string("\u{0}"))
        XCTAssertEqual(value(#""\U0010FFFF""#), .string("\u{10FFFF}"))
        XCTAssertEqual(value("\"tab\tinside and ünïcødé\""), .string("tab\tinside and ünïcødé"))
        XCTAssertEqual(value(##""# not a comment""##), .string("# not a comment"))
    }

    func testLiteralStrings() {
        XCTAssertEqual(value(#"'C:\Users\nodejs\templates'"#), .string(#"C:\Users\nodejs\templates"#))
        XCTAssertEqual(value(#"'<\i\c*\s*>'"#), .string(#"<\i\c*\s*>"#))
        XCTAssertEqual(value(#"'Tom "Dubs" Preston'"#), .string(#"Tom "Dubs" Preston"#))
        XCTAssertEqual(value("''"), .string(""))
    }

    func testMultilineBasicStrings() {
        XCTAssertEqual(value("\"\"\"\nRoses are red\nViolets are blue\"\"\""), .string("Roses are red\nViolets are blue"))
        // CRLF inside is read as LF, and the newline after the delimiter is dropped.
        XCTAssertEqual(value("\"\"\"\r\none\r\ntwo\"\"\""), .string("one\ntwo"))
        // A line-ending backslash eats the newline and the whitespace after it.
        XCTAssertEqual(value("\"\"\"\nThe quick brown \\\n\n\n  fox jumps \\   \n    over.\"\"\""), .string("The quick brown fox jumps over."))
        XCTAssertEqual(value("\"\"\"\\\r\n   x\\\n   \"\"\""), .string("x"))
        XCTAssertEqual(value("\"\"\"Here are two quotation marks: \"\". Simple enough.\"\"\""), .string("Here are two quotation marks: \"\". Simple enough."))
        XCTAssertEqual(value("\"\"\"Here are three: \"\"\\\".\"\"\""), .string("Here are three: \"\"\"."))
        XCTAssertEqual(value("\"\"\"\"This,\" she said, \"is just a pointless statement.\"\"\"\""), .string("\"This,\" she said, \"is just a pointless statement.\""))
        XCTAssertEqual(value("\"\"\"a\"\"\"\"\""), .string("a\"\""))
        XCTAssertEqual(value("\"\"\"\"\"\""), .string(""))
        XCTAssertEqual(value("\"\"\"tab\there \\u00E9\"\"\""), .string("tab\there é"))
    }

    func testMultilineLiteralStrings() {
        XCTAssertEqual(value("'''I [dw]on't need \\d{2} apples'''"), .string("I [dw]on't need \\d{2} apples"))
        XCTAssertEqual(value("'''\nThe first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n'''"),
                       .string("The first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n"))
        XCTAssertEqual(value("''''That,' she said, 'is still pointless.''''"), .string("'That,' she said, 'is still pointless.'"))
        XCTAssertEqual(value("'''a\\\n  b'''"), .string("a\\\n  b"))
        XCTAssertEqual(value("'''x'''''"), .string("x''"))
    }

    // MARK: Integers

    func testIntegers() {
        XCTAssertEqual(value("+99"), .integer(99))
        XCTAssertEqual(value("42"), .integer(42))
        XCTAssertEqual(value("0"), .integer(0))
        XCTAssertEqual(value("-17"), .integer(-17))
        XCTAssertEqual(value("+0"), .integer(0))
        XCTAssertEqual(value("-0"), .integer(0))
        XCTAssertEqual(value("1_000"), .integer(1000))
        XCTAssertEqual(value("5_349_221"), .integer(5_349_221))
        XCTAssertEqual(value("53_49_221"), .integer(5_349_221))
        XCTAssertEqual(value("1_2_3_4_5"), .integer(12345))
        XCTAssertEqual(value("9223372036854775807"), .integer(Int.max))
        XCTAssertEqual(value("-9223372036854775808"), .integer(Int.min))
    }

    func testHexOctalBinary() {
        XCTAssertEqual(value("0xDEADBEEF"), .integer(0xDEADBEEF))
        XCTAssertEqual(value("0xdeadbeef"), .integer(0xDEADBEEF))
        XCTAssertEqual(value("0xdead_beef"), .integer(0xDEADBEEF))
        XCTAssertEqual(value("0x00FF"), .integer(255))
        XCTAssertEqual(value("0x7FFFFFFFFFFFFFFF"), .integer(Int.max))
        XCTAssertEqual(value("0o01234567"), .integer(0o1234567))
        XCTAssertEqual(value("0o755"), .integer(0o755))
        XCTAssertEqual(value("0b11010110"), .integer(0b11010110))
        XCTAssertEqual(value("0b1_0"), .integer(2))
    }

    // MARK: Floats

    func testFloats() {
        XCTAssertEqual(value("+1.0"), .float(1.0))
        XCTAssertEqual(value("3.1415"), .float(3.1415))
        XCTAssertEqual(value("-0.01"), .float(-0.01))
        XCTAssertEqual(value("5e+22"), .float(5e22))
        XCTAssertEqual(value("1e06"), .float(1e6))
        XCTAssertEqual(value("-2E-2"), .float(-0.02))
        XCTAssertEqual(value("6.626e-34"), .float(6.626e-34))
        XCTAssertEqual(value("224_617.445_991_228"), .float(224_617.445_991_228))
        XCTAssertEqual(value("0.0"), .float(0))
        XCTAssertEqual(value("-0.0")?.double?.sign, .minus)
        XCTAssertEqual(value("0e0"), .float(0))
        XCTAssertEqual(value("1e1_0"), .float(1e10))
    }

    func testInfinityAndNaN() {
        XCTAssertEqual(value("inf"), .float(.infinity))
        XCTAssertEqual(value("+inf"), .float(.infinity))
        XCTAssertEqual(value("-inf"), .float(-.infinity))
        for text in ["nan", "+nan", "-nan"] {
            XCTAssertEqual(value(text)?.double?.isNaN, true, text)
        }
    }

    // MARK: Booleans and date-times

    func testBooleans() {
        XCTAssertEqual(value("true"), .boolean(true))
        XCTAssertEqual(value("false"), .boolean(false))
        XCTAssertEqual(parse("a=true\nb=false#c"), ["a": .boolean(true), "b": .boolean(false)])
    }

    func testDateTimesKeepTheirText() {
        for text in ["1979-05-27T07:32:00Z", "1979-05-27T00:32:00-07:00", "1979-05-27T00:32:00.999999-07:00",
                     "1979-05-27 07:32:00Z", "1979-05-27t07:32:00z", "1979-05-27T07:32:00+14:00",
                     "1979-05-27T07:32:00", "1979-05-27T00:32:00.999999", "1979-05-27 07:32:00",
                     "1979-05-27", "07:32:00", "00:32:00.999999", "2000-02-29", "2024-02-29T23:59:60Z",
                     "0000-01-01 00:00:00Z", "0000-01-01", "9999-12-31 23:59:59", "9999-12-31T23:59:59.123456789Z"] {
            XCTAssertEqual(value(text), .dateTime(text), text)
        }
        XCTAssertEqual(parse("d = 1979-05-27 # a local date, then a comment")["d"], .dateTime("1979-05-27"))
        XCTAssertEqual(value("[1979-05-27, 07:32:00]"), .array([.dateTime("1979-05-27"), .dateTime("07:32:00")]))
    }

    // MARK: Arrays

    func testArrays() {
        XCTAssertEqual(value("[ 1, 2, 3 ]"), .array([.integer(1), .integer(2), .integer(3)]))
        XCTAssertEqual(value("[]"), .array([]))
        XCTAssertEqual(value("[ [ 1, 2 ], [3, 4, 5] ]"), .array([.array([.integer(1), .integer(2)]), .array([.integer(3), .integer(4), .integer(5)])]))
        XCTAssertEqual(value("[ \"all\", 'strings', \"\"\"are the same\"\"\", '''type''' ]"),
                       .array([.string("all"), .string("strings"), .string("are the same"), .string("type")]))
        // Mixed types are allowed in TOML 1.0.
        XCTAssertEqual(value("[ 0.1, 0.2, 0.5, 1, 2, 5, \"x\", true, { a = 1 } ]"),
                       .array([.float(0.1), .float(0.2), .float(0.5), .integer(1), .integer(2), .integer(5), .string("x"), .boolean(true), .table(["a": .integer(1)])]))
        // Over several lines, with comments, CRLF and a trailing comma.
        XCTAssertEqual(value("[ # first\n  1, # one\r\n\n  2 # two\n  , 3, # three\n]"), .array([.integer(1), .integer(2), .integer(3)]))
        XCTAssertEqual(value("[\n  \"a\",\n  \"b\",\n]"), .array([.string("a"), .string("b")]))
    }

    // MARK: Inline tables

    func testInlineTables() {
        XCTAssertEqual(value("{ first = \"Tom\", last = \"Preston-Werner\" }"), .table(["first": .string("Tom"), "last": .string("Preston-Werner")]))
        XCTAssertEqual(value("{}"), .table([:]))
        XCTAssertEqual(value("{ x = 1, y.z = 2, y.w = 3 }"), .table(["x": .integer(1), "y": .table(["z": .integer(2), "w": .integer(3)])]))
        XCTAssertEqual(value("{ type.name = \"pug\" }"), .table(["type": .table(["name": .string("pug")])]))
        XCTAssertEqual(value("{ a = { b = { c = [1, {d = true}] } } }"),
                       .table(["a": .table(["b": .table(["c": .array([.integer(1), .table(["d": .boolean(true)])])])])]))
        // A value inside may span lines; the table's own braces and commas may not.
        XCTAssertEqual(value("{ list = [\n 1,\n 2\n], s = \"\"\"\nx\"\"\" }"), .table(["list": .array([.integer(1), .integer(2)]), "s": .string("x")]))
    }

    func testAccessorsAnswerOnlyTheirOwnKind() {
        XCTAssertEqual(TOMLValue.integer(1).int, 1)
        XCTAssertNil(TOMLValue.integer(1).double)
        XCTAssertNil(TOMLValue.float(1).int)
        XCTAssertNil(TOMLValue.string("1").int)
        XCTAssertEqual(TOMLValue.boolean(true).bool, true)
        XCTAssertEqual(TOMLValue.dateTime("07:32:00").dateTime, "07:32:00")
        XCTAssertNil(TOMLValue.dateTime("07:32:00").string)
        XCTAssertEqual(TOMLValue.array([]).array, [])
        XCTAssertEqual(TOMLValue.table([:]).table, TOMLTable())
        XCTAssertEqual(TOMLValue.float(1).kindDescription, "a float")
    }
}
