#if canImport(Glibc)
import Glibc
#endif
import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The front door's last cache-hit answer, kept with the request line it answered, so that
/// the same request (the same line but for its id: a caller asking for its token again, or
/// `authctl token` run again) is answered with the same bytes without reading it again.
///
/// Why: a cache hit made Strings of the request's values, resolved the account, hashed the
/// cache key under three locks and wrote the answer: ~25 000 instructions per request, most
/// of the front door's own time per request (docs/performance.md, "Profiling"). A caller
/// asks for the same token again and again.
///
/// Exact: the answer is a function of the line (the id aside) and of what the stamp
/// (`CacheHitStamp`) stands for. The line is compared byte for byte around the id, and the
/// id must be one value of the forms the scanner reads, so the line would scan the same;
/// the stamp is asked (`TokensService.stillServes`) on every use, and it stops holding with
/// every change to the cache, the accounts or the configuration and when the token's life
/// runs short for the request. Only ever asked where the front door serves the request
/// itself, which it does only while no `[[allow]]` rule is in force (the caller gate has
/// nothing to ask then). Belongs to the front door's thread.
struct AnswerMemo {
    /// The line up to the id's value, and from after it to the end.
    private var prefix: [UInt8] = []
    private var suffix: [UInt8] = []
    /// The answer after its id (`,"result":{…}}`) and the newline.
    private var rest: [UInt8] = []
    /// What the answer rests on; nil: nothing kept.
    private(set) var stamp: CacheHitStamp?
    /// The beginning of the answer for the id being answered, up to that id.
    private var head = ResponseWriter(capacity: 64)

    /// Writes the beginning of the answer for `id` (`withAnswer` lends it).
    mutating func writeHead(_ id: RequestID) {
        head.clear()
        head.head(id)
    }

    /// Lends the answer's two parts: its beginning for the id (`writeHead`) and the rest.
    func withAnswer<T>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> T) -> T {
        head.bytes.withUnsafeBytes { head in rest.withUnsafeBytes { body(head, $0) } }
    }

    /// Keeps `answer`, the answer of `line`, whose id lies at `idRange` in the line and whose
    /// part after the id begins at `resultStart`. Reuses its room: no allocation once warm.
    mutating func keep(line: UnsafeRawBufferPointer, idRange: Range<Int>, answer: Data, resultStart: Int, stamp: CacheHitStamp) {
        clear()
        prefix.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[0..<idRange.lowerBound]))
        suffix.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[idRange.upperBound...]))
        answer.withUnsafeBytes { rest.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[resultStart...])) }
        rest.append(UInt8(ascii: "\n"))
        self.stamp = stamp
    }

    /// Forgets the answer; the token's bytes in it are overwritten.
    mutating func clear() {
        guard stamp != nil || !rest.isEmpty else { return }
        rest.withUnsafeMutableBytes { SecretBytes.wipe($0) }
        prefix.removeAll(keepingCapacity: true)
        suffix.removeAll(keepingCapacity: true)
        rest.removeAll(keepingCapacity: true)
        stamp = nil
    }

    /// The id of `line` when it is the kept line but for its id, else nil. The id must be one
    /// value the scanner reads as an id, of its forms exactly (`RequestScanner`): null, an
    /// integer of at most 18 digits, or a string of printable ASCII without escapes.
    func id(ifSameRequest line: UnsafeRawBufferPointer) -> RequestID? {
        guard stamp != nil, line.count > prefix.count + suffix.count else { return nil }
        let end = line.count - suffix.count
        guard Self.same(prefix, UnsafeRawBufferPointer(rebasing: line[0..<prefix.count])),
              Self.same(suffix, UnsafeRawBufferPointer(rebasing: line[end...]))
        else { return nil }
        return Self.id(UnsafeRawBufferPointer(rebasing: line[prefix.count..<end]))
    }

    /// Whether `bytes` holds what `kept` holds (both of `kept.count` bytes).
    private static func same(_ kept: [UInt8], _ bytes: UnsafeRawBufferPointer) -> Bool {
        kept.withUnsafeBytes { k in
            guard let a = k.baseAddress, let b = bytes.baseAddress else { return k.count == bytes.count }
            return memcmp(a, b, k.count) == 0
        }
    }

    /// One whole id value, as the scanner reads it, or nil.
    static func id(_ value: UnsafeRawBufferPointer) -> RequestID? {
        guard let first = value.first else { return nil }
        if first == UInt8(ascii: "\"") {
            guard value.count >= 2, value[value.count - 1] == UInt8(ascii: "\"") else { return nil }
            let text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 1)])
            guard text.allSatisfy({ $0 >= 0x20 && $0 < 0x80 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return nil }
            return .string(String(decoding: text, as: UTF8.self))
        }
        if value.elementsEqual("null".utf8) { return .null }
        // -?(0|[1-9][0-9]*), at most 18 digits: what the scanner reads as an id that fits Int64.
        let negative = first == UInt8(ascii: "-")
        let digits = UnsafeRawBufferPointer(rebasing: value[(negative ? 1 : 0)...])
        guard (1...18).contains(digits.count), digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              !(digits.count > 1 && digits[0] == UInt8(ascii: "0"))
        else { return nil }
        var n: Int64 = 0
        for d in digits { n = n * 10 + Int64(d - UInt8(ascii: "0")) }
        return .number(negative ? -n : n)
    }
}
