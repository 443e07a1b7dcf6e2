import BrokerCrypto

/// Reads `params.value` of a `login.answer` request line straight from its bytes into a
/// `SecretBytes`: the answer may be a password, and neither the request scanner nor
/// JSONDecoder may leave it behind as a `String` (docs/security.md). Only the request's
/// own structure is read; JSONDecoder still checks the line and reads `login_id`.
enum SecretAnswer {
    /// The answer, or nil when the line has no `params.value` string.
    static func value(in line: UnsafeRawBufferPointer) -> SecretBytes? {
        var reader = Reader(bytes: line)
        var found: SecretBytes?
        let ok = reader.object(depth: 0) { key, reader in
            guard key == "params", reader.peekAfterSpace == UInt8(ascii: "{") else { return reader.skipValue(depth: 1) }
            return reader.object(depth: 1) { key, reader in
                guard key == "value", reader.peekAfterSpace == UInt8(ascii: "\"") else { return reader.skipValue(depth: 2) }
                found = reader.secretString()
                return found != nil
            }
        }
        return ok ? found : nil
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var peek: UInt8 { index < bytes.count ? bytes[index] : 0 }

        var peekAfterSpace: UInt8 {
            mutating get {
                skipSpace()
                return peek
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ byte: UInt8) -> Bool {
            skipSpace()
            guard peek == byte else { return false }
            index += 1
            return true
        }

        /// `{ "key": value, … }`; keys are compared as raw bytes (a key with escapes is
        /// not one this reader looks for).
        mutating func object(depth: Int, _ member: (String, inout Reader) -> Bool) -> Bool {
            guard depth < 32, expect(UInt8(ascii: "{")) else { return false }
            if expect(UInt8(ascii: "}")) { return true }
            while true {
                skipSpace()
                guard peek == UInt8(ascii: "\""), let range = rawString() else { return false }
                let key = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
                guard expect(UInt8(ascii: ":")), member(key, &self) else { return false }
                if expect(UInt8(ascii: ",")) { continue }
                return expect(UInt8(ascii: "}"))
            }
        }

        /// The bytes between a string's quotes, escapes left as they are.
        mutating func rawString() -> Range<Int>? {
            guard peek == UInt8(ascii: "\"") else { return nil }
            var i = index + 1
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    defer { index = i + 1 }
                    return (index + 1)..<i
                case UInt8(ascii: "\\"):
                    i += 2
                default:
                    i += 1
                }
            }
            return nil
        }

        mutating func skipValue(depth: Int) -> Bool {
            skipSpace()
            switch peek {
            case UInt8(ascii: "\""):
                return rawString() != nil
            case UInt8(ascii: "{"):
                return object(depth: depth) { _, reader in reader.skipValue(depth: depth + 1) }
            case UInt8(ascii: "["):
                guard depth < 32 else { return false }
                index += 1
                if expect(UInt8(ascii: "]")) { return true }
                while true {
                    guard skipValue(depth: depth + 1) else { return false }
                    if expect(UInt8(ascii: ",")) { continue }
                    return expect(UInt8(ascii: "]"))
                }
            default:
                // Numbers and literals: JSONDecoder checks them; here they only end somewhere.
                let start = index
                while index < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) {
                    index += 1
                }
                return index > start
            }
        }

        /// The string at the reader, unescaped into a `SecretBytes` (never longer than its
        /// escaped form); nil when an escape is malformed.
        mutating func secretString() -> SecretBytes? {
            guard let range = rawString() else { return nil }
            let raw = UnsafeRawBufferPointer(rebasing: bytes[range])
            var valid = true
            let secret = SecretBytes(capacity: raw.count) { out in
                var o = 0
                var i = 0
                func put(_ b: UInt8) { out[o] = b; o += 1 }
                func hex4(_ at: Int) -> UInt32? { Self.hex4(raw, at: at) }
                while i < raw.count {
                    let b = raw[i]
                    guard b == UInt8(ascii: "\\") else {
                        guard b >= 0x20 else { valid = false; return o }
                        put(b)
                        i += 1
                        continue
                    }
                    guard i + 1 < raw.count else { valid = false; return o }
                    switch raw[i + 1] {
                    case UInt8(ascii: "\""): put(0x22)
                    case UInt8(ascii: "\\"): put(0x5C)
                    case UInt8(ascii: "/"): put(0x2F)
                    case UInt8(ascii: "b"): put(0x08)
                    case UInt8(ascii: "f"): put(0x0C)
                    case UInt8(ascii: "n"): put(0x0A)
                    case UInt8(ascii: "r"): put(0x0D)
                    case UInt8(ascii: "t"): put(0x09)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4(i + 2) else { valid = false; return o }
                        i += 6
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard i + 1 < raw.count, raw[i] == UInt8(ascii: "\\"), raw[i + 1] == UInt8(ascii: "u"),
                                  let low = hex4(i + 2), (0xDC00..<0xE000).contains(low) else { valid = false; return o }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                            i += 6
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            valid = false
                            return o
                        }
                        Self.utf8(scalar, put)
                        continue
                    default:
                        valid = false
                        return o
                    }
                    i += 2
                }
                return o
            }
            return valid ? secret : nil
        }

        /// The four hex digits of a `\u` escape at `at`; nil when they are not four hex digits.
        private static func hex4(_ raw: UnsafeRawBufferPointer, at: Int) -> UInt32? {
            guard at + 4 <= raw.count else { return nil }
            var v: UInt32 = 0
            for k in 0..<4 {
                let c = raw[at + k]
                let d: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                v = v << 4 | UInt32(d)
            }
            return v
        }

        /// `scalar` in UTF-8, byte by byte: never longer than the six or twelve bytes of its escape.
        private static func utf8(_ scalar: UInt32, _ put: (UInt8) -> Void) {
            switch scalar {
            case 0..<0x80: put(UInt8(scalar))
            case 0x80..<0x800:
                put(UInt8(0xC0 | scalar >> 6)); put(UInt8(0x80 | scalar & 0x3F))
            case 0x800..<0x10000:
                put(UInt8(0xE0 | scalar >> 12)); put(UInt8(0x80 | scalar >> 6 & 0x3F)); put(UInt8(0x80 | scalar & 0x3F))
            default:
                put(UInt8(0xF0 | scalar >> 18)); put(UInt8(0x80 | scalar >> 12 & 0x3F))
                put(UInt8(0x80 | scalar >> 6 & 0x3F)); put(UInt8(0x80 | scalar & 0x3F))
            }
        }
    }
}
