import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A result the server writes as JSON itself instead of through JSONEncoder: the answers
/// of the hot path. A profile (docs/performance.md) showed JSONEncoder, escaping the
/// kilobyte of a JWT character by character, as a third of a cache hit's cost.
protocol JSONWritable {
    /// Writes the value as one JSON object.
    func write(to out: inout ResponseWriter)
}

/// Builds one JSON-RPC response line's bytes. Strings are escaped as JSON requires (quote,
/// backslash, control characters); `/` is left as it is, as the encoder is configured to.
struct ResponseWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// `{"jsonrpc":"2.0","id":…,"result":…}`.
    static func success(_ id: RequestID, _ result: some JSONWritable) -> Data {
        var out = ResponseWriter(capacity: 1536)
        out.raw(#"{"jsonrpc":"2.0","id":"#)
        switch id {
        case .number(let n): out.raw(String(n))
        case .string(let s): out.string(s)
        case .null: out.raw("null")
        }
        out.raw(#","result":"#)
        result.write(to: &out)
        out.raw("}")
        return Data(out.bytes)
    }

    mutating func raw(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// `"key":` before a member; `first` leaves out the comma.
    mutating func key(_ name: String, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func string(_ text: String) {
        var text = text
        bytes.append(UInt8(ascii: "\""))
        text.withUTF8 { utf8 in
            // Tokens never need escaping: check 8 bytes at a time and copy them whole.
            guard Self.needsEscaping(UnsafeRawBufferPointer(utf8)) else {
                bytes.append(contentsOf: utf8)
                return
            }
            var runStart = 0
            for (i, b) in utf8.enumerated() where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                bytes.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(b)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension ResponseWriter {
    /// True when `text` holds a byte JSON must escape: a control character, `"` or `\`.
    /// Eight bytes per step with the classic SWAR tests ("has a byte less than n", "has a
    /// byte equal to n"); bytes of 0x80 and above (UTF-8 beyond ASCII) never match.
    static func needsEscaping(_ text: UnsafeRawBufferPointer) -> Bool {
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
}

extension TokenGetResult: JSONWritable {
    /// The members JSONEncoder would write, in the same order; absent optionals are left out.
    func write(to out: inout ResponseWriter) {
        out.raw("{")
        out.key("access_token", first: true)
        out.string(accessToken)
        out.key("token_type")
        out.string(tokenType)
        out.key("expires_at")
        out.raw(String(expiresAt))
        if let scope {
            out.key("scope")
            out.string(scope)
        }
        if let resource {
            out.key("resource")
            out.string(resource)
        }
        out.key("provider")
        out.string(provider)
        out.key("account")
        out.string(account)
        out.raw("}")
    }
}
