/// The four kinds of string: basic `"…"`, literal `'…'`, and their multi-line `"""…"""`
/// and `'''…'''` forms. Messages never quote a string's text: it may be a secret.
extension TOMLParser {
    private static let quote = UInt8(ascii: "\"")
    private static let apostrophe = UInt8(ascii: "'")
    private static let backslash = UInt8(ascii: "\\")

    /// A string value of any kind, at its opening quote.
    mutating func string() throws(Failure) -> String {
        let q = bytes[i]
        let triple = peek(1) == q && peek(2) == q
        if q == Self.quote {
            return triple ? try multilineString(escapes: true) : try basicString()
        }
        return triple ? try multilineString(escapes: false) : try literalString()
    }

    /// `"…"` with escapes, on one line.
    mutating func basicString() throws(Failure) -> String {
        let open = i
        i += 1
        var text: [UInt8] = []
        while true {
            guard let b = byte, b != UInt8(ascii: "\n"), b != UInt8(ascii: "\r") else {
                throw Failure(reason: "a string is not closed: end it with \" on the same line, or use \"\"\" for a multi-line string", offset: open)
            }
            switch b {
            case Self.quote:
                i += 1
                return String(decoding: text, as: UTF8.self)
            case Self.backslash:
                try escape(into: &text, open: open)
            default:
                try append(b, to: &text)
            }
        }
    }

    /// `'…'` as written, on one line.
    mutating func literalString() throws(Failure) -> String {
        let open = i
        i += 1
        var text: [UInt8] = []
        while true {
            guard let b = byte, b != UInt8(ascii: "\n"), b != UInt8(ascii: "\r") else {
                throw Failure(reason: "a string is not closed: end it with ' on the same line, or use ''' for a multi-line string", offset: open)
            }
            if b == Self.apostrophe {
                i += 1
                return String(decoding: text, as: UTF8.self)
            }
            try append(b, to: &text)
        }
    }

    /// `"""…"""` (with escapes and line-ending backslashes) or `'''…'''` (as written).
    /// A newline right after the opening delimiter is dropped; CRLF is kept as LF.
    private mutating func multilineString(escapes: Bool) throws(Failure) -> String {
        let open = i
        let q = bytes[i]
        i += 3
        if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { try newline() }
        var text: [UInt8] = []
        while true {
            guard let b = byte else {
                let delimiter = escapes ? "\"\"\"" : "'''"
                throw Failure(reason: "a multi-line string is not closed: end it with \(delimiter)", offset: open)
            }
            switch b {
            case q:
                var run = 1
                while peek(run) == q { run += 1 }
                if run >= 3 {
                    // Up to two quotes just before the closing delimiter belong to the string.
                    let kept = min(run, 5) - 3
                    text.append(contentsOf: repeatElement(q, count: kept))
                    i += 3 + kept
                    return String(decoding: text, as: UTF8.self)
                }
                text.append(contentsOf: repeatElement(q, count: run))
                i += run
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                try newline()
                text.append(UInt8(ascii: "\n"))
            case Self.backslash where escapes:
                if lineEndingBackslash() {
                    try skipBlankLines()
                } else {
                    try escape(into: &text, open: open)
                }
            default:
                try append(b, to: &text)
            }
        }
    }

    /// Whether the backslash at `i` ends its line (only whitespace after it); if so, moves
    /// to the newline.
    private mutating func lineEndingBackslash() -> Bool {
        var k = i + 1
        while k < bytes.count, bytes[k] == UInt8(ascii: " ") || bytes[k] == UInt8(ascii: "\t") { k += 1 }
        guard k < bytes.count, bytes[k] == UInt8(ascii: "\n") || bytes[k] == UInt8(ascii: "\r") else { return false }
        i = k
        return true
    }

    /// Skips whitespace and newlines after a line-ending backslash.
    private mutating func skipBlankLines() throws(Failure) {
        while let b = byte {
            switch b {
            case UInt8(ascii: " "), UInt8(ascii: "\t"): i += 1
            case UInt8(ascii: "\n"), UInt8(ascii: "\r"): try newline()
            default: return
            }
        }
    }

    /// A byte of a string's text; control characters other than tab must be escaped.
    private mutating func append(_ b: UInt8, to text: inout [UInt8]) throws(Failure) {
        guard !Self.isControl(b) else {
            throw Failure(reason: "a string holds a control character: write it as an escape (\\t, \\n, \\uXXXX …) in a \"…\" string", offset: i)
        }
        text.append(b)
        i += 1
    }

    /// The escape at `i` (a backslash), in a basic string that opened at `open`.
    private mutating func escape(into text: inout [UInt8], open: Int) throws(Failure) {
        let at = i
        guard let letter = peek(1) else {
            throw Failure(reason: "a string is not closed: end it with \"", offset: open)
        }
        i += 2
        let simple: UInt8? = switch letter {
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "t"): 0x09
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "r"): 0x0D
        case Self.quote: Self.quote
        case Self.backslash: Self.backslash
        default: nil
        }
        if let simple {
            text.append(simple)
            return
        }
        let digits: Int
        switch letter {
        case UInt8(ascii: "u"): digits = 4
        case UInt8(ascii: "U"): digits = 8
        default:
            throw Failure(reason: "a string holds an unknown escape: the escapes are \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX and \\UXXXXXXXX, so write a backslash as \\\\", offset: at)
        }
        var value: UInt32 = 0
        for _ in 0..<digits {
            guard let b = byte, let d = Self.hexValue(b) else {
                throw Failure(reason: "a \\u escape needs 4 hexadecimal digits and a \\U escape 8", offset: at)
            }
            value = value << 4 | UInt32(d)
            i += 1
        }
        guard let scalar = Unicode.Scalar(value) else {
            throw Failure(reason: "a \\u or \\U escape is not a Unicode scalar value (surrogates and values above 10FFFF are not)", offset: at)
        }
        UTF8.encode(scalar) { text.append($0) }
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
