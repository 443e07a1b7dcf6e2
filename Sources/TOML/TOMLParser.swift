/// Reads a TOML 1.0 document from its UTF-8 bytes: the document's lines, keys and table
/// headers here; values in the extensions (`TOMLParser+Values`, `+Strings`, `+Scalars`).
///
/// Problems are thrown as `Failure` (a byte offset) and turned into a `TOMLError` (line
/// and column) once, at the top.
struct TOMLParser {
    let bytes: [UInt8]
    /// Where reading is.
    var i: Int
    /// Where the document starts: after a UTF-8 byte order mark, if any.
    let start: Int
    var tree = TableTree()
    /// The table that key/value lines go into: the last header's, else the root.
    var current = TableTree.root

    init(bytes: [UInt8]) {
        self.bytes = bytes
        start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        i = start
    }

    var atEnd: Bool { i >= bytes.count }

    /// The byte at `i`, or nil at the end.
    var byte: UInt8? { i < bytes.count ? bytes[i] : nil }

    /// The byte `ahead` after `i`, or nil past the end.
    func peek(_ ahead: Int) -> UInt8? {
        i + ahead < bytes.count ? bytes[i + ahead] : nil
    }

    /// Reads the whole document.
    mutating func parseDocument() throws(TOMLError) -> TOMLTable {
        do throws(Failure) {
            try document()
        } catch {
            throw position(of: error)
        }
        return tree.table(TableTree.root)
    }

    /// Refuses bytes that are not UTF-8 (a `String` is always UTF-8; bytes from a file may not be).
    func checkUTF8() throws(TOMLError) {
        var k = 0
        let n = bytes.count
        while k < n {
            let lead = bytes[k]
            if lead < 0x80 { k += 1; continue }
            var length = 0
            var scalar: UInt32 = 0
            var smallest: UInt32 = 0
            if lead & 0xE0 == 0xC0 { length = 2; scalar = UInt32(lead & 0x1F); smallest = 0x80 }
            else if lead & 0xF0 == 0xE0 { length = 3; scalar = UInt32(lead & 0x0F); smallest = 0x800 }
            else if lead & 0xF8 == 0xF0 { length = 4; scalar = UInt32(lead & 0x07); smallest = 0x10000 }
            var valid = length > 0 && k + length <= n
            if valid {
                for j in 1..<length {
                    let next = bytes[k + j]
                    guard next & 0xC0 == 0x80 else { valid = false; break }
                    scalar = scalar << 6 | UInt32(next & 0x3F)
                }
            }
            guard valid, scalar >= smallest, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else {
                throw position(of: Failure(reason: "the text is not valid UTF-8 here: save the file as UTF-8", offset: k))
            }
            k += length
        }
    }

    /// The line and column of a failure's offset.
    func position(of failure: Failure) -> TOMLError {
        let end = min(failure.offset, bytes.count)
        var line = 1
        var lineStart = start
        for k in start..<max(start, end) where bytes[k] == UInt8(ascii: "\n") {
            line += 1
            lineStart = k + 1
        }
        var column = 1
        for k in lineStart..<max(lineStart, end) where bytes[k] & 0xC0 != 0x80 {
            column += 1
        }
        return TOMLError(line: line, column: column, reason: failure.reason)
    }

    // MARK: - Lines

    private mutating func document() throws(Failure) {
        while true {
            skipWhitespace()
            guard let b = byte else { return }
            switch b {
            case UInt8(ascii: "#"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                try endOfLine(after: "")
            case UInt8(ascii: "["):
                try header()
                try endOfLine(after: "a table header")
            default:
                try keyValue(into: current)
                try endOfLine(after: "a value")
            }
        }
    }

    /// Whitespace, an optional comment, then a newline or the end.
    private mutating func endOfLine(after what: String) throws(Failure) {
        skipWhitespace()
        if byte == UInt8(ascii: "#") { try comment() }
        guard let b = byte else { return }
        if b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r") {
            try newline()
            return
        }
        throw Failure(reason: "\(what) must be followed by the end of the line or a # comment: put each key = value and each [table] on a line of its own", offset: i)
    }

    /// Skips spaces and tabs.
    mutating func skipWhitespace() {
        while let b = byte, b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") { i += 1 }
    }

    /// Skips a newline at `i`: LF or CRLF.
    mutating func newline() throws(Failure) {
        if byte == UInt8(ascii: "\r") {
            guard peek(1) == UInt8(ascii: "\n") else {
                throw Failure(reason: "a carriage return must be followed by a line feed: save the file with LF or CRLF line endings", offset: i)
            }
            i += 2
        } else {
            i += 1
        }
    }

    /// Skips a comment from its `#` to the end of its line (not the newline).
    mutating func comment() throws(Failure) {
        i += 1
        while let b = byte, b != UInt8(ascii: "\n"), b != UInt8(ascii: "\r") {
            guard !Self.isControl(b) else {
                throw Failure(reason: "a comment holds a control character: remove it", offset: i)
            }
            i += 1
        }
    }

    /// Skips whitespace, newlines and comments (between the values of an array).
    mutating func skipBlank() throws(Failure) {
        while let b = byte {
            switch b {
            case UInt8(ascii: " "), UInt8(ascii: "\t"): i += 1
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"): try newline()
            case UInt8(ascii: "#"): try comment()
            default: return
            }
        }
    }

    // MARK: - Keys and headers

    /// `key = value`, added to table `node`.
    mutating func keyValue(into node: Int) throws(Failure) {
        let key = try self.key()
        guard byte == UInt8(ascii: "=") else {
            // Only the first part: with `secret . "value"` (a dot typed for =), the rest is the value.
            let shown = Self.show(Array(key.prefix(1))) + (key.count > 1 ? ".…" : "")
            throw Failure(reason: "expected = after the key \(shown): write key = value", offset: i)
        }
        i += 1
        skipWhitespace()
        let path = Self.show(key, under: tree.nodes[node].path)
        let value = try self.value(depth: tree.nodes[node].depth + key.count, path: path)
        try tree.insert(key, value: value, into: node)
    }

    /// A bare, quoted or dotted key, and the whitespace after it.
    mutating func key() throws(Failure) -> [KeyPart] {
        var parts: [KeyPart] = []
        while true {
            skipWhitespace()
            parts.append(try simpleKey())
            skipWhitespace()
            guard byte == UInt8(ascii: ".") else { return parts }
            i += 1
        }
    }

    private mutating func simpleKey() throws(Failure) -> KeyPart {
        let at = i
        switch byte {
        case UInt8(ascii: "\"")?:
            guard !(peek(1) == UInt8(ascii: "\"") && peek(2) == UInt8(ascii: "\"")) else {
                throw Failure(reason: "a key cannot be a multi-line string: quote it with \" or '", offset: at)
            }
            return KeyPart(name: try basicString(), offset: at)
        case UInt8(ascii: "'")?:
            guard !(peek(1) == UInt8(ascii: "'") && peek(2) == UInt8(ascii: "'")) else {
                throw Failure(reason: "a key cannot be a multi-line string: quote it with \" or '", offset: at)
            }
            return KeyPart(name: try literalString(), offset: at)
        case let b? where Self.isBareKeyByte(b):
            while let b = byte, Self.isBareKeyByte(b) { i += 1 }
            return KeyPart(name: String(decoding: bytes[at..<i], as: UTF8.self), offset: at)
        default:
            throw Failure(reason: "expected a key: a bare key holds only A-Z, a-z, 0-9, _ and -, so quote any other key", offset: at)
        }
    }

    /// `[a.b]` or `[[a.b]]`: the table that the following lines fill.
    private mutating func header() throws(Failure) {
        i += 1
        let isArray = byte == UInt8(ascii: "[")
        if isArray { i += 1 }
        let key = try self.key()
        guard byte == UInt8(ascii: "]"), !isArray || peek(1) == UInt8(ascii: "]") else {
            throw Failure(reason: isArray ? "an array-of-tables header must end with ]]" : "a table header must end with ]", offset: i)
        }
        i += isArray ? 2 : 1
        current = isArray ? try tree.appendArrayTable(key) : try tree.defineTable(key)
    }

    // MARK: - Bytes

    static func isBareKeyByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
            || isDigit(b) || b == UInt8(ascii: "_") || b == UInt8(ascii: "-")
    }

    static func isDigit(_ b: UInt8) -> Bool {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
    }

    /// A control character TOML forbids in comments and strings: all but tab.
    static func isControl(_ b: UInt8) -> Bool {
        (b < 0x20 && b != UInt8(ascii: "\t")) || b == 0x7F
    }

    /// A key's parts for a message: `a.b`, `"with space".c`.
    static func show(_ key: [KeyPart], under parent: String = "") -> String {
        key.reduce(parent) { TableTree.join($0, $1.name) }
    }
}
