/// A small JSON reader for the answers on the hot path, without Codable.
///
/// `JSONDecoder` spends most of a short-lived client's instructions on protocol
/// conformance lookups the first time it runs (docs/performance.md: `authctl token`). This
/// reader takes a line and gives back a tree; anything it does not accept makes it return
/// nil, and the caller falls back to `JSONDecoder`, which then reports the problem.
enum LightJSON: Equatable {
    case string(String)
    /// An integer that fits in 64 bits; other numbers keep their text.
    case integer(Int64)
    // A String, not a resilient type such as Substring.UTF8View: with one, this enum's layout
    // is only known at run time, and the runtime builds its metadata (and that of every
    // Optional, tuple and array of it) on first use (docs/performance.md).
    case number(String)
    case bool(Bool)
    case null
    case array([LightJSON])
    case object([(String, LightJSON)])

    /// The member `key` of an object.
    subscript(key: String) -> LightJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    var string: String? { if case .string(let s) = self { s } else { nil } }
    var integer: Int64? { if case .integer(let n) = self { n } else { nil } }

    static func == (a: LightJSON, b: LightJSON) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): x == y
        case (.integer(let x), .integer(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.null, .null): true
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.elementsEqual(y) { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    /// Parses one JSON text; nil when it is not valid JSON or nests deeper than 32.
    static func parse(_ bytes: some Collection<UInt8>) -> LightJSON? {
        let array = Array(bytes)
        return array.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer)
            guard let value = reader.value(depth: 0) else { return nil }
            reader.skipSpace()
            return reader.at == buffer.count ? value : nil
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        mutating func value(depth: Int) -> LightJSON? {
            guard depth < 32 else { return nil }
            skipSpace()
            guard at < bytes.count else { return nil }
            switch bytes[at] {
            case UInt8(ascii: "{"): return object(depth: depth)
            case UInt8(ascii: "["): return array(depth: depth)
            case UInt8(ascii: "\""): return string().map { .string($0) }
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        mutating func literal(_ word: StaticString, _ value: LightJSON) -> LightJSON? {
            let count = word.utf8CodeUnitCount
            guard at + count <= bytes.count else { return nil }
            for i in 0..<count where bytes[at + i] != word.utf8Start[i] { return nil }
            at += count
            return value
        }

        mutating func object(depth: Int) -> LightJSON? {
            at += 1
            var members: [(String, LightJSON)] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members) }
            while true {
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\""), let key = string() else { return nil }
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { return nil }
                at += 1
                guard let member = value(depth: depth + 1) else { return nil }
                members.append((key, member))
                skipSpace()
                guard at < bytes.count else { return nil }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                guard bytes[at] == UInt8(ascii: "}") else { return nil }
                at += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) -> LightJSON? {
            at += 1
            var elements: [LightJSON] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array(elements) }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                skipSpace()
                guard at < bytes.count else { return nil }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                guard bytes[at] == UInt8(ascii: "]") else { return nil }
                at += 1
                return .array(elements)
            }
        }

        /// A string starting at the opening quote; escapes decoded, UTF-8 validated.
        mutating func string() -> String? {
            at += 1
            let start = at
            // The common case: no escapes, so the bytes are the string.
            while at < bytes.count, bytes[at] != UInt8(ascii: "\""), bytes[at] != UInt8(ascii: "\\"), bytes[at] >= 0x20 { at += 1 }
            guard at < bytes.count else { return nil }
            if bytes[at] == UInt8(ascii: "\"") {
                defer { at += 1 }
                return Reader.text(UnsafeBufferPointer(rebasing: bytes[start..<at]))
            }
            var out = Array(bytes[start..<at])
            while at < bytes.count {
                let b = bytes[at]
                if b == UInt8(ascii: "\"") {
                    at += 1
                    return out.withUnsafeBufferPointer { Reader.text($0) }
                }
                guard b >= 0x20 else { return nil }
                guard b == UInt8(ascii: "\\") else { out.append(b); at += 1; continue }
                at += 1
                guard at < bytes.count else { return nil }
                let e = bytes[at]
                at += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard var scalar = hex4() else { return nil }
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else { return nil }
                        at += 2
                        guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    out.append(contentsOf: String(Character(unicode)).utf8)
                default: return nil
                }
            }
            return nil
        }

        /// `bytes` as a String when they are valid UTF-8, else nil.
        ///
        /// ASCII (tokens, URLs, names, dates: nearly every string a token answer holds) is
        /// valid as it is, and `String(decoding:as:)` on a buffer of bytes is specialised at
        /// compile time. `String(validating:as:)` is generic at run time: its first use has
        /// the runtime look up and build metadata (a tenth of an `authctl token` process,
        /// docs/performance.md), so it is left to the strings that need it.
        static func text(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
            if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
            return String(validating: bytes, as: UTF8.self)
        }

        mutating func hex4() -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[at]
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                at += 1
            }
            return value
        }

        /// A number by JSON's grammar; an integer within Int64 becomes `.integer`.
        mutating func number() -> LightJSON? {
            let start = at
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard digits(leadingZeroAlone: true) else { return nil }
            var integral = true
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                at += 1
                integral = false
                guard digits(leadingZeroAlone: false) else { return nil }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                at += 1
                integral = false
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard digits(leadingZeroAlone: false) else { return nil }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
            if integral, let n = Int64(text) { return .integer(n) }
            return .number(text)
        }

        mutating func digits(leadingZeroAlone: Bool) -> Bool {
            let start = at
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") { at += 1 }
            if at == start { return false }
            // JSON allows no leading zero before other digits ("01").
            return !(leadingZeroAlone && at - start > 1 && bytes[start] == UInt8(ascii: "0"))
        }
    }
}
