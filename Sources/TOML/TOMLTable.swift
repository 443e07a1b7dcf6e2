/// A TOML table: keys in the order the file defines them, each with its value.
///
/// The order makes messages and key checks deterministic (the first unknown key in the
/// file is the one reported). Two tables are equal when they hold the same keys with
/// equal values, whatever the order.
public struct TOMLTable: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The entries in file order.
    private var entries: [(key: String, value: TOMLValue)] = []
    /// Where each key is in `entries`.
    private var positions: [String: Int] = [:]

    /// An empty table.
    public init() {}

    /// A table of `elements`, in that order; a key given twice is a programming error.
    public init(dictionaryLiteral elements: (String, TOMLValue)...) {
        for (key, value) in elements {
            precondition(positions[key] == nil, "TOMLTable literal names a key twice")
            self[key] = value
        }
    }

    /// Reads a TOML 1.0 document.
    public init(parsing text: String) throws(TOMLError) {
        var parser = TOMLParser(bytes: Array(text.utf8))
        self = try parser.parseDocument()
    }

    /// Reads a TOML 1.0 document from its bytes, which must be UTF-8 (a BOM may start them).
    public init(parsingUTF8 bytes: [UInt8]) throws(TOMLError) {
        var parser = TOMLParser(bytes: bytes)
        try parser.checkUTF8()
        self = try parser.parseDocument()
    }

    /// The keys in the order the document defines them.
    public var keys: [String] { entries.map(\.key) }

    /// How many keys the table holds.
    public var count: Int { entries.count }

    public var isEmpty: Bool { entries.isEmpty }

    /// The value of `key`, or nil. Setting nil removes the key; setting a new key appends it.
    public subscript(key: String) -> TOMLValue? {
        get { positions[key].map { entries[$0].value } }
        set {
            if let index = positions[key] {
                if let newValue {
                    entries[index].value = newValue
                } else {
                    entries.remove(at: index)
                    positions[key] = nil
                    for i in index..<entries.count { positions[entries[i].key] = i }
                }
            } else if let newValue {
                positions[key] = entries.count
                entries.append((key, newValue))
            }
        }
    }

    /// The entries in file order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: TOMLValue)]> {
        entries.makeIterator()
    }

    public var underestimatedCount: Int { entries.count }

    public static func == (lhs: TOMLTable, rhs: TOMLTable) -> Bool {
        guard lhs.entries.count == rhs.entries.count else { return false }
        for (key, value) in lhs.entries {
            guard let other = rhs[key], other == value else { return false }
        }
        return true
    }
}
