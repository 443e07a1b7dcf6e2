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
    /// What the answer rests on when it is a cache hit's (`AnswerMemo`); nil otherwise.
    var cacheHit: CacheHitStamp? { get }
}

extension JSONWritable {
    var cacheHit: CacheHitStamp? { nil }
}

/// Builds one JSON-RPC response line's bytes. Strings are escaped as JSON requires (quote,
/// backslash, control characters); `/` is left as it is, as the encoder is configured to.
struct ResponseWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// `{"jsonrpc":"2.0","id":…,"result":…}`.
    static func success(_ id: RequestID, _ result: some JSONWritable) -> Data {
        var resultStart = 0
        return success(id, result, resultStart: &resultStart)
    }

    /// `success(_:_:)`, and where what follows the id begins (`,"result":…`): the part of
    /// the answer that does not depend on the id.
    static func success(_ id: RequestID, _ result: some JSONWritable, resultStart: inout Int) -> Data {
        var out = ResponseWriter(capacity: 1536)
        out.head(id)
        resultStart = out.bytes.count
        out.raw(#","result":"#)
        result.write(to: &out)
        out.raw("}")
        return Data(out.bytes)
    }

    /// An answer's beginning, up to its id: `{"jsonrpc":"2.0","id":…`.
    mutating func head(_ id: RequestID) {
        raw(#"{"jsonrpc":"2.0","id":"#)
        switch id {
        case .number(let n): integer(n)
        case .string(let s): string(s)
        case .null: raw("null")
        }
    }

    /// JSON text of the writer's own (punctuation, member names), copied as it is: one
    /// append of a constant, no String made or escaped per answer.
    mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// `n` in decimal, as `String(n)` writes it, without making the String.
    mutating func integer(_ n: Int64) {
        if n < 0 { bytes.append(UInt8(ascii: "-")) }
        // The magnitude as UInt64: -Int64.min does not fit Int64.
        var m = n.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var i = 20
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(m % 10)
                m /= 10
            } while m > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[i..<20]))
        }
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
        out.raw(#"{"access_token":"#)
        out.string(accessToken, plain: accessTokenIsPlainJSON)
        out.raw(#","token_type":"#)
        out.string(tokenType)
        out.raw(#","expires_at":"#)
        out.integer(expiresAt)
        if let scope {
            out.raw(#","scope":"#)
            out.string(scope)
        }
        if let resource {
            out.raw(#","resource":"#)
            out.string(resource)
        }
        out.raw(#","provider":"#)
        out.string(provider)
        out.raw(#","account":"#)
        out.string(account)
        if let chosenBy {
            out.raw(#","chosen_by":"#)
            out.string(chosenBy)
        }
        out.raw("}")
    }
}
