/// `%XX` decoding for URL parts: a proxy URL's user information, a redirect's query.
public enum PercentDecoding {
    /// Decodes `%XX` escapes (two hex digits, nothing else); a `%` not followed by two hex
    /// digits stays as it is. With `plusIsSpace` (form encoding, as in a query string), `+`
    /// is a space. Invalid UTF-8 becomes U+FFFD.
    public static func decode(_ text: Substring, plusIsSpace: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var bytes = Array(text.utf8)[...]
        while let b = bytes.popFirst() {
            if plusIsSpace, b == UInt8(ascii: "+") {
                out.append(0x20)
            } else if b == UInt8(ascii: "%"), bytes.count >= 2,
                      let high = hexValue(bytes[bytes.startIndex]), let low = hexValue(bytes[bytes.startIndex + 1]) {
                out.append(high << 4 | low)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
