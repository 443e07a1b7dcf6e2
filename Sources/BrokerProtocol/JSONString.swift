/// The one JSON string escaper (RFC 8259 §7) for the JSON the package writes by hand: the
/// server's hot-path answers (ResponseWriter), `authctl token`'s request (TokenWire) and
/// DPoP proofs (OAuth). Quote, backslash and control characters are escaped; `/` and
/// non-ASCII are left as they are, as the server's JSONEncoder is configured to.
/// Inlinable so that the hot paths in other modules keep a specialised copy: no call, no
/// allocation beyond the growth of `out`.
public enum JSONString {
    /// Appends `text` as a quoted JSON string to `out`.
    @inlinable
    public static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        out.append(UInt8(ascii: "\""))
        text.withUTF8 { utf8 in
            // Tokens never need escaping: check 8 bytes at a time and copy them whole.
            guard needsEscaping(UnsafeRawBufferPointer(utf8)) else {
                out.append(contentsOf: utf8)
                return
            }
            var runStart = 0
            for (i, b) in utf8.enumerated() where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                out.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(b)
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                default:
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigit(b >> 4), hexDigit(b & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `text` as a quoted JSON string to `out`; `plain` says `needsEscaping` already
    /// found nothing to escape in it (a cached token, checked once when it was stored), so
    /// its bytes are copied whole without looking at them again.
    @inlinable
    public static func append(_ text: String, plain: Bool, to out: inout [UInt8]) {
        guard plain else { return append(text, to: &out) }
        var text = text
        out.append(UInt8(ascii: "\""))
        text.withUTF8 { out.append(contentsOf: $0) }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether `text` holds a byte JSON must escape (`needsEscaping(_:)` on its UTF-8).
    public static func needsEscaping(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { needsEscaping(UnsafeRawBufferPointer($0)) }
    }

    /// `text` as a quoted JSON string, for the few JSON texts built as strings.
    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 2)
        append(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// True when `text` holds a byte JSON must escape: a control character, `"` or `\`.
    /// Eight bytes per step with the classic SWAR tests ("has a byte less than n", "has a
    /// byte equal to n"); bytes of 0x80 and above (UTF-8 beyond ASCII) never match.
    @inlinable
    public static func needsEscaping(_ text: UnsafeRawBufferPointer) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func special(_ word: UInt64) -> Bool {
            let control = (word &- ones &* 0x20) & ~word & highs
            let q = word ^ (ones &* 0x22)
            let quote = (q &- ones) & ~q & highs
            let b = word ^ (ones &* 0x5C)
            let backslash = (b &- ones) & ~b & highs
            return (control | quote | backslash) != 0
        }
        var i = 0
        while i + 8 <= text.count {
            if special(text.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return true }
            i += 8
        }
        while i < text.count {
            let c = text[i]
            if c < 0x20 || c == 0x22 || c == 0x5C { return true }
            i += 1
        }
        return false
    }

    @inlinable
    static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
