/// A value after `=` or in an array: dispatches on its first byte; arrays and inline tables.
extension TOMLParser {
    /// The value at `i`. `depth` is how deeply it is nested, `path` its key for messages.
    mutating func value(depth: Int, path: String) throws(Failure) -> TOMLValue {
        try TableTree.checkDepth(depth, at: i)
        switch byte {
        case nil, UInt8(ascii: "\n")?, UInt8(ascii: "\r")?, UInt8(ascii: "#")?, UInt8(ascii: ",")?, UInt8(ascii: "]")?, UInt8(ascii: "}")?:
            throw Failure(reason: "the value of \(path) is missing: write it after the = on the same line", offset: i)
        case UInt8(ascii: "\"")?, UInt8(ascii: "'")?:
            return .string(try string())
        case UInt8(ascii: "[")?:
            return try array(depth: depth, path: path)
        case UInt8(ascii: "{")?:
            return try inlineTable(depth: depth, path: path)
        default:
            return try scalar()
        }
    }

    /// `[a, b, …]`: may span lines, hold comments and end with a comma.
    private mutating func array(depth: Int, path: String) throws(Failure) -> TOMLValue {
        let open = i
        i += 1
        var values: [TOMLValue] = []
        while true {
            try skipBlank()
            guard let b = byte else { throw Self.unclosedArray(open) }
            if b == UInt8(ascii: "]") {
                i += 1
                return .array(values)
            }
            if b == UInt8(ascii: ",") {
                throw Failure(reason: "an array has a comma with no value before it: remove it", offset: i)
            }
            values.append(try value(depth: depth + 1, path: "\(path)[\(values.count)]"))
            try skipBlank()
            switch byte {
            case nil:
                throw Self.unclosedArray(open)
            case UInt8(ascii: ",")?:
                i += 1
            case UInt8(ascii: "]")?:
                i += 1
                return .array(values)
            default:
                throw Failure(reason: "the values of an array must be separated by commas: add a , or close the array with ]", offset: i)
            }
        }
    }

    private static func unclosedArray(_ open: Int) -> Failure {
        Failure(reason: "an array is not closed: end it with ]", offset: open)
    }

    /// `{ k = v, … }`: on one line, no trailing comma; it cannot be extended later.
    private mutating func inlineTable(depth: Int, path: String) throws(Failure) -> TOMLValue {
        let open = i
        i += 1
        let node = try tree.newInlineTable(path: path, depth: depth, at: open)
        skipWhitespace()
        if byte == UInt8(ascii: "}") {
            i += 1
            return .table(tree.table(node))
        }
        while true {
            skipWhitespace()
            try inlineTableContinues(open)
            try keyValue(into: node)
            skipWhitespace()
            try inlineTableContinues(open)
            switch byte {
            case UInt8(ascii: ",")?:
                i += 1
                skipWhitespace()
                if byte == UInt8(ascii: "}") {
                    throw Failure(reason: "an inline table cannot end with a comma: remove it", offset: i)
                }
            case UInt8(ascii: "}")?:
                i += 1
                return .table(tree.table(node))
            default:
                throw Failure(reason: "the entries of an inline table must be separated by commas: add a , or close the table with }", offset: i)
            }
        }
    }

    /// Refuses the end of the document, a newline or a comment inside an inline table.
    private func inlineTableContinues(_ open: Int) throws(Failure) {
        switch byte {
        case nil:
            throw Failure(reason: "an inline table is not closed: end it with } on the same line", offset: open)
        case UInt8(ascii: "\n")?, UInt8(ascii: "\r")?, UInt8(ascii: "#")?:
            throw Failure(reason: "an inline table must be on one line (TOML 1.0), with no comment inside: close it with } or write it as a [table]", offset: i)
        default:
            return
        }
    }
}
