import TOML
import XCTest

/// Keys, tables, arrays of tables, and the rules on defining each only once.
final class TableTests: XCTestCase {
    func testKeysBareQuotedAndDotted() {
        let t = parse("""
            key = 1
            bare_key = 2
            bare-key = 3
            1234 = 4
            "127.0.0.1" = 5
            "character encoding" = 6
            "ʎǝʞ" = 7
            'key2' = 8
            'quoted "value"' = 9
            "" = 10
            name . first = 11
            site."google.com" = 12
            3.14159 = "pi"
            "esc\\u0041pe" = 13
            """)
        XCTAssertEqual(t.keys, ["key", "bare_key", "bare-key", "1234", "127.0.0.1", "character encoding", "ʎǝʞ", "key2",
                                "quoted \"value\"", "", "name", "site", "3", "escApe"])
        XCTAssertEqual(t["name"], .table(["first": .integer(11)]))
        XCTAssertEqual(t["site"], .table(["google.com": .integer(12)]))
        XCTAssertEqual(t["3"], .table(["14159": .string("pi")]))
        XCTAssertEqual(t[""], .integer(10))
    }

    func testDottedKeysBuildTables() {
        let t = parse("""
            fruit.apple.color = "red"
            fruit.apple.taste.sweet = true
            fruit.orange = 2
            """)
        XCTAssertEqual(t, ["fruit": .table(["apple": .table(["color": .string("red"), "taste": .table(["sweet": .boolean(true)])]), "orange": .integer(2)])])
    }

    func testTableHeaders() {
        let t = parse("""
            # the root table first
            top = 0

            [table-1]
            key1 = "some string"
            key2 = 123

            [ dog . "tater.man" ]   # whitespace and quotes in a header
            type.name = "pug"

            [x.y.z.w] # super-tables are made as needed
            [x] # and may be defined afterwards, once
            k = 1
            """)
        XCTAssertEqual(t.keys, ["top", "table-1", "dog", "x"])
        XCTAssertEqual(t["table-1"], .table(["key1": .string("some string"), "key2": .integer(123)]))
        XCTAssertEqual(t["dog"]?.table?["tater.man"], .table(["type": .table(["name": .string("pug")])]))
        XCTAssertEqual(t["x"], .table(["y": .table(["z": .table(["w": .table([:])])]), "k": .integer(1)]))
        XCTAssertEqual(parse("[a]\n[b]")["a"], .table([:]))
    }

    func testSubtablesUnderDottedKeys() {
        let t = parse("""
            [fruit]
            apple.color = "red"
            apple.taste.sweet = true

            [fruit.apple.texture]
            smooth = true
            """)
        XCTAssertEqual(t["fruit"]?.table?["apple"]?.table?.keys, ["color", "taste", "texture"])
    }

    func testArraysOfTables() {
        let t = parse("""
            [[products]]
            name = "Hammer"
            sku = 738594937

            [[products]]  # an empty table in the array

            [[products]]
            name = "Nail"
            color = "gray"

            [[fruits]]
            name = "apple"

            [fruits.physical]  # a subtable of the last fruit
            color = "red"

            [[fruits.varieties]]  # an array of tables in the last fruit
            name = "red delicious"

            [[fruits.varieties]]
            name = "granny smith"

            [[fruits]]
            name = "banana"

            [[fruits.varieties]]
            name = "plantain"
            """)
        XCTAssertEqual(t["products"], .array([.table(["name": .string("Hammer"), "sku": .integer(738594937)]), .table([:]),
                                              .table(["name": .string("Nail"), "color": .string("gray")])]))
        XCTAssertEqual(t["fruits"], .array([
            .table(["name": .string("apple"), "physical": .table(["color": .string("red")]),
                    "varieties": .array([.table(["name": .string("red delicious")]), .table(["name": .string("granny smith")])])]),
            .table(["name": .string("banana"), "varieties": .array([.table(["name": .string("plantain")])])]),
        ]))
        // [a] may define the super-table that [[a.b]] made.
        XCTAssertEqual(parse("[[a.b]]\nx = 1\n[a]\ny = 2")["a"], .table(["b": .array([.table(["x": .integer(1)])]), "y": .integer(2)]))
    }

    func testKeysKeepFileOrderAndEqualityIgnoresIt() {
        let t = parse("z = 1\na = 2\n[m]\n[b]\nq = 3")
        XCTAssertEqual(t.keys, ["z", "a", "m", "b"])
        XCTAssertEqual(t.map(\.key), ["z", "a", "m", "b"])
        XCTAssertEqual(t.count, 4)
        XCTAssertEqual(parse("a = 1\nb = 2"), parse("b = 2\na = 1"))
        XCTAssertNotEqual(parse("a = 1\nb = 2"), parse("a = 1\nb = 3"))
        XCTAssertNotEqual(parse("a = 1\nb = 2"), parse("a = 1"))
    }

    func testSubscriptSetsAndRemoves() {
        var t: TOMLTable = ["a": .integer(1), "b": .integer(2), "c": .integer(3)]
        t["b"] = nil
        XCTAssertEqual(t.keys, ["a", "c"])
        XCTAssertEqual(t["c"], .integer(3))
        t["a"] = .string("x")
        t["d"] = .boolean(false)
        XCTAssertEqual(t.keys, ["a", "c", "d"])
        XCTAssertEqual(t["a"], .string("x"))
        XCTAssertTrue(TOMLTable().isEmpty)
    }

    // MARK: Defining twice

    func testAKeyDefinedTwice() {
        assertFails("name = \"Tom\"\nname = \"Pradyun\"", at: (2, 1), "the key name is defined twice")
        assertFails("spelling = 1\n\"spelling\" = 2", at: (2, 1), "defined twice")
        assertFails("a.b = 1\na.b = 2", at: (2, 3), "the key a.b is defined twice")
        assertFails("[t]\nx = 1\nx = 2", at: (3, 1), "the key t.x is defined twice")
        assertFails("a = { b = 1, b = 2 }", "the key a.b is defined twice")
        assertFails("\"a b\" = 1\n'a b' = 2", "the key \"a b\" is defined twice")
    }

    func testATableDefinedTwice() {
        assertFails("[fruit]\napple = 1\n\n[fruit]\norange = 2", at: (4, 2), "the table [fruit] is defined twice")
        assertFails("[a.b]\n[a.b]", "defined twice")
        assertFails("[x.y.z]\n[x]\n[x]", at: (3, 2), "defined twice")
    }

    func testValuesAreNotTables() {
        // [table] over a key that holds a value.
        assertFails("[fruit]\napple = \"red\"\n\n[fruit.apple]\ntexture = 1", at: (4, 8), "fruit.apple already holds a string, so it cannot also be a table")
        assertFails("a = 1\n[a.b]", at: (2, 2), "already holds an integer")
        assertFails("a = 1\na.b = 2", at: (2, 1), "already holds an integer")
        assertFails("a = [1]\n[a]", "already holds an array")
    }

    func testInlineTablesCannotBeExtended() {
        assertFails("type = { name = \"Nail\" }\ntype.edible = false", at: (2, 1), "type is an inline table, which cannot be extended")
        assertFails("a = {}\n[a]", at: (2, 2), "inline table")
        assertFails("a = {}\n[a.b]", "inline table")
        assertFails("a = { b = 1 }\n[[a.c]]", "inline table")
        assertFails("a = { b = { c = 1 } }\n[a.b]", "inline table")
        assertFails("a = { b = { c = 1 }, b.d = 2 }", "a.b is an inline table")
    }

    func testDottedKeysAndHeadersDoNotMix() {
        // [fruit.apple] after dotted keys made fruit.apple.
        assertFails("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple]", at: (4, 8), "already made by dotted keys")
        assertFails("[fruit]\napple.taste.sweet = true\n[fruit.apple.taste]", "already made by dotted keys")
        assertFails("a.b = 1\n[a]", at: (2, 2), "already made by dotted keys")
        // Dotted keys cannot add to a table that has a header (toml-test table/injection-1 and -2).
        assertFails("[a.b.c]\nz = 9\n[a]\nb.c.t = 1", at: (4, 1), "a.b is a table made by a [header]")
        assertFails("[a.b.c.d]\nz = 9\n[a]\nb.c.d.k.t = 1", "made by a [header]")
        assertFails("[product]\ntype = { name = \"Nail\" }\n[product.type.x]", "inline table")
    }

    func testArraysOfTablesAndTablesDoNotMix() {
        assertFails("[[fruits]]\nname = 1\n[fruits]", at: (3, 2), "fruits is an array of tables: write its headers as [[fruits]]")
        assertFails("[fruit]\n[[fruit]]", at: (2, 3), "fruit is already a table, so [[fruit]] cannot make it an array of tables")
        assertFails("fruits = []\n[[fruits]]", at: (2, 3), "fruits is an array value, so [[fruits]] cannot add tables to it")
        assertFails("fruits = [{ a = 1 }]\n[[fruits]]", "array value")
        assertFails("[[a]]\nb.c = 1\n[a.b]", "already made by dotted keys")
        assertFails("[[a]]\n[a.b]\n[a.b]", "defined twice")
        assertFails("[[a]]\n[a]\nx = 1", "array of tables")
        assertFails("[[a.b]]\n[a]\nb.y = 2", "a.b is an array of tables: put the key under a [[a.b]] header")
    }

    func testSpecAndToolingExamplesOfRedefinition() {
        // Tables inside an array value are values too (toml-lang/toml#908).
        assertFails("a = [{ b = 1 }]\n[a.c]\nfoo = 1", at: (2, 2), "a already holds an array")
        assertFails("tbl = { fruit = { apple.color = \"red\", apple.taste.sweet = true }, fruit.apple.texture = { smooth = true } }",
                    "tbl.fruit is an inline table")
        assertFails("[fruit]\napple.color = \"red\"\napple.taste.sweet = true\n[fruit.apple.taste]\n[fruit.apple.texture]\nsmooth = true",
                    at: (4, 14), "already made by dotted keys")
    }

    func testEveryArrayElementIsItsOwnTable() {
        let t = parse("[[a]]\n[a.b]\nx = 1\n[[a]]\n[a.b]\nx = 2")
        XCTAssertEqual(t["a"], .array([.table(["b": .table(["x": .integer(1)])]), .table(["b": .table(["x": .integer(2)])])]))
    }

    func testNestingIsBounded() {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        assertFails("a = " + deep, "nested more than 128 levels")
        let deepKey = (0..<200).map { "k\($0)" }.joined(separator: ".")
        assertFails("[\(deepKey)]", "nested more than 128 levels")
        assertFails("\(deepKey) = 1", "nested more than 128 levels")
        XCTAssertNotNil(value(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)))
    }
}
