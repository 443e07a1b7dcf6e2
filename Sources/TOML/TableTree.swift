/// A problem found while reading, at a byte offset; `TOMLParser` turns the offset into a
/// line and column.
struct Failure: Error {
    var reason: String
    var offset: Int
}

/// One part of a (possibly dotted) key, with where it starts for messages.
struct KeyPart {
    var name: String
    var offset: Int
}

/// The tables of a document while it is read, each remembering how it came to be, for
/// TOML's rules on defining a table or key only once.
struct TableTree {
    /// How a table came to be.
    enum Origin {
        /// Made as the parent of a `[a.b]` or `[[a.b]]` header; `[a]` may still define it, once.
        case implicit
        /// Defined by its own `[header]` or `[[header]]` (or the root table).
        case header
        /// Made by dotted keys (`a.b = 1`), in its section or in an inline table.
        case dotted
    }

    /// What a key holds while the document is read.
    enum Entry {
        /// A finished value: a string, a number, an array value, an inline table …
        case value(TOMLValue)
        /// A table that may still grow.
        case table(Int)
        /// An array of tables made by `[[header]]`s, which the next `[[header]]` extends.
        case tableArray([Int])
    }

    struct Node {
        var origin: Origin
        var keys: [String] = []
        var entries: [String: Entry] = [:]
        /// The table's dotted path, for messages (`providers.corp`, `allow[1]`).
        var path: String
        /// How deep the table is nested.
        var depth: Int
    }

    /// Nesting beyond this is refused, so a hostile file cannot exhaust the stack.
    static let maxDepth = 128
    static let root = 0

    private(set) var nodes: [Node] = [Node(origin: .header, path: "", depth: 0)]

    /// A fresh table for an inline table being read.
    mutating func newInlineTable(path: String, depth: Int, at offset: Int) throws(Failure) -> Int {
        try Self.checkDepth(depth, at: offset)
        nodes.append(Node(origin: .dotted, path: path, depth: depth))
        return nodes.count - 1
    }

    /// Adds `key = value` to table `start`, making the tables of a dotted key.
    mutating func insert(_ key: [KeyPart], value: TOMLValue, into start: Int) throws(Failure) {
        guard let last = key.last else { return }
        var node = start
        for part in key.dropLast() {
            let path = Self.join(nodes[node].path, part.name)
            switch nodes[node].entries[part.name] {
            case nil:
                node = try addTable(part, origin: .dotted, to: node)
            case .table(let child) where nodes[child].origin == .dotted:
                node = child
            case .table:
                throw Failure(reason: "\(path) is a table made by a [header], so dotted keys cannot add to it: put the key under [\(path)]", offset: part.offset)
            case .tableArray:
                throw Failure(reason: "\(path) is an array of tables: put the key under a [[\(path)]] header", offset: part.offset)
            case .value(let v):
                throw Self.notATable(v, path: path, at: part.offset)
            }
        }
        guard nodes[node].entries[last.name] == nil else {
            throw Failure(reason: "the key \(Self.join(nodes[node].path, last.name)) is defined twice: keep one of them", offset: last.offset)
        }
        nodes[node].keys.append(last.name)
        nodes[node].entries[last.name] = .value(value)
    }

    /// Defines the table of a `[header]`; returns it.
    mutating func defineTable(_ key: [KeyPart]) throws(Failure) -> Int {
        guard let last = key.last else { return Self.root }
        let parent = try walkHeader(key.dropLast())
        let path = Self.join(nodes[parent].path, last.name)
        switch nodes[parent].entries[last.name] {
        case nil:
            return try addTable(last, origin: .header, to: parent)
        case .table(let child):
            switch nodes[child].origin {
            case .implicit:
                nodes[child].origin = .header
                return child
            case .header:
                throw Failure(reason: "the table [\(path)] is defined twice: merge the two into one", offset: last.offset)
            case .dotted:
                throw Failure(reason: "the table \(path) is already made by dotted keys, so [\(path)] cannot define it again: keep one of the two", offset: last.offset)
            }
        case .tableArray:
            throw Failure(reason: "\(path) is an array of tables: write its headers as [[\(path)]]", offset: last.offset)
        case .value(let v):
            throw Self.notATable(v, path: path, at: last.offset)
        }
    }

    /// Adds a table to the array of tables of a `[[header]]`; returns the new table.
    mutating func appendArrayTable(_ key: [KeyPart]) throws(Failure) -> Int {
        guard let last = key.last else { return Self.root }
        let parent = try walkHeader(key.dropLast())
        let path = Self.join(nodes[parent].path, last.name)
        switch nodes[parent].entries[last.name] {
        case nil:
            let child = try newNode(last, origin: .header, under: parent, path: path + "[0]")
            nodes[parent].keys.append(last.name)
            nodes[parent].entries[last.name] = .tableArray([child])
            return child
        case .tableArray(var list):
            let child = try newNode(last, origin: .header, under: parent, path: path + "[\(list.count)]")
            list.append(child)
            nodes[parent].entries[last.name] = .tableArray(list)
            return child
        case .table:
            throw Failure(reason: "\(path) is already a table, so [[\(path)]] cannot make it an array of tables", offset: last.offset)
        case .value(.array(_)):
            throw Failure(reason: "\(path) is an array value, so [[\(path)]] cannot add tables to it: write all its elements one way", offset: last.offset)
        case .value(let v):
            throw Self.notATable(v, path: path, at: last.offset)
        }
    }

    /// The finished table `index`.
    func table(_ index: Int) -> TOMLTable {
        var result = TOMLTable()
        let node = nodes[index]
        for key in node.keys {
            switch node.entries[key] {
            case .value(let v): result[key] = v
            case .table(let child): result[key] = .table(table(child))
            case .tableArray(let list): result[key] = .array(list.map { .table(table($0)) })
            case nil: break
            }
        }
        return result
    }

    /// Walks the leading parts of a header's key, making implicit tables; through an array
    /// of tables it goes into the last table.
    private mutating func walkHeader(_ parts: ArraySlice<KeyPart>) throws(Failure) -> Int {
        var node = Self.root
        for part in parts {
            let path = Self.join(nodes[node].path, part.name)
            switch nodes[node].entries[part.name] {
            case nil:
                node = try addTable(part, origin: .implicit, to: node)
            case .table(let child):
                node = child
            case .tableArray(let list):
                guard let lastTable = list.last else { return node }
                node = lastTable
            case .value(let v):
                throw Self.notATable(v, path: path, at: part.offset)
            }
        }
        return node
    }

    private mutating func addTable(_ part: KeyPart, origin: Origin, to parent: Int) throws(Failure) -> Int {
        let child = try newNode(part, origin: origin, under: parent, path: Self.join(nodes[parent].path, part.name))
        nodes[parent].keys.append(part.name)
        nodes[parent].entries[part.name] = .table(child)
        return child
    }

    private mutating func newNode(_ part: KeyPart, origin: Origin, under parent: Int, path: String) throws(Failure) -> Int {
        let depth = nodes[parent].depth + 1
        try Self.checkDepth(depth, at: part.offset)
        nodes.append(Node(origin: origin, path: path, depth: depth))
        return nodes.count - 1
    }

    static func checkDepth(_ depth: Int, at offset: Int) throws(Failure) {
        guard depth <= maxDepth else {
            throw Failure(reason: "tables and arrays are nested more than \(maxDepth) levels deep: flatten the document", offset: offset)
        }
    }

    private static func notATable(_ value: TOMLValue, path: String, at offset: Int) -> Failure {
        if case .table = value {
            return Failure(reason: "\(path) is an inline table, which cannot be extended after it is written: add the key inside its braces", offset: offset)
        }
        return Failure(reason: "\(path) already holds \(value.kindDescription), so it cannot also be a table", offset: offset)
    }

    /// `parent.key`, the key quoted when it is not a bare key.
    static func join(_ parent: String, _ key: String) -> String {
        let shown = isBare(key) ? key : quoted(key)
        return parent.isEmpty ? shown : parent + "." + shown
    }

    static func isBare(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.allSatisfy(TOMLParser.isBareKeyByte)
    }

    private static func quoted(_ key: String) -> String {
        var out = "\""
        for scalar in key.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
