/// RFC 9110 §5.6.2's `token`: what a method or a field name is made of. One definition for
/// every place that reads or writes one: this client's request and response heads, the
/// daemon's sign-in listener, a DPoP proof's `htm`.
public enum HTTPToken {
    /// Whether `byte` is a `tchar`.
    public static func isByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
