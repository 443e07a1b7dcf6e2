import BrokerCrypto
/// `application/x-www-form-urlencoded` bodies (RFC 6749 Appendix B): every byte outside
/// the unreserved set (ALPHA DIGIT - . _ ~) is percent-encoded, space as `%20`.
public enum FormEncoding {
    private static let hex = Array("0123456789ABCDEF".unicodeScalars)

    /// Encodes one name or value.
    public static func escape(_ string: String) -> String {
        var out = ""
        out.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// Appends `&name=secret` (or `name=secret` to an empty body), percent-encoding the
    /// secret byte by byte into `body`: no String of it is made. `body` is reserved once,
    /// so that no smaller copy of it is left behind by growing.
    static func append(name: String, secret: SecretBytes, to body: inout [UInt8]) {
        let prefix = Array((body.isEmpty ? "" : "&").utf8) + Array(escape(name).utf8) + [UInt8(ascii: "=")]
        var grown = [UInt8]()
        grown.reserveCapacity(body.count + prefix.count + secret.count * 3)
        grown.append(contentsOf: body)
        grown.append(contentsOf: prefix)
        let digits = Array("0123456789ABCDEF".utf8)
        secret.withUnsafeBytes { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                     UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                     UInt8(ascii: "_"), UInt8(ascii: "~"):
                    grown.append(byte)
                default:
                    grown.append(UInt8(ascii: "%"))
                    grown.append(digits[Int(byte >> 4)])
                    grown.append(digits[Int(byte & 0x0F)])
                }
            }
        }
        body = grown
    }

    /// Encodes pairs in order; a name may repeat (RFC 8707 `resource`).
    static func encode(_ pairs: [(String, String)]) -> [UInt8] {
        Array(pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&").utf8)
    }
}
