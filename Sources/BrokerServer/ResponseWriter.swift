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

    /// `"key":` before a member; `first` leaves out the comma. Member names are the
    /// writer's own constants, which need no escaping: copied as they are.
    mutating func key(_ name: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// `text` as a JSON string, by the package's one escaper (BrokerProtocol's JSONString).
    mutating func string(_ text: String) {
        JSONString.append(text, to: &bytes)
    }

    /// `text` as a JSON string, copied whole when `plain` (known to need no escaping).
    mutating func string(_ text: String, plain: Bool) {
        JSONString.append(text, plain: plain, to: &bytes)
    }
}

extension TokenGetResult: JSONWritable {
    /// The members JSONEncoder would write, in the same order; absent optionals are left out.
    func write(to out: inout ResponseWriter) {
        out.raw("{")
        out.key("access_token", first: true)
        out.string(accessToken, plain: accessTokenIsPlainJSON)
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
