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
    /// The line up to the id's value, the line after it, and the answer after its id
    /// (`,"result":{…}}`) with the newline, one after the other: one array, reused.
    private var kept: [UInt8] = []
    /// Where the line after the id begins in `kept`, and where the answer's rest begins.
    private var suffixStart = 0
    private var restStart = 0
    /// What the answer rests on; nil: nothing kept.
    private(set) var stamp: CacheHitStamp?

    /// Every answer's beginning, up to its id (`ResponseWriter.head`).
    private static let head: StaticString = #"{"jsonrpc":"2.0","id":"#

    /// Keeps `answer`, the answer of `line`, whose id lies at `idRange` in the line and whose
    /// part after the id begins at `resultStart`. Writes over what was kept, in its room: no
    /// allocation once warm, and none of the answer it replaces is left.
    mutating func keep(line: UnsafeRawBufferPointer, idRange: Range<Int>, answer: Data, resultStart: Int, stamp: CacheHitStamp) {
        let total = idRange.lowerBound + (line.count - idRange.upperBound) + (answer.count - resultStart) + 1
        if total < kept.count { kept.withUnsafeMutableBytes { SecretBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: $0[total...])) } }
        kept.removeAll(keepingCapacity: true)
        kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[0..<idRange.lowerBound]))
        suffixStart = kept.count
        kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[idRange.upperBound...]))
        restStart = kept.count
        answer.withUnsafeBytes { kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[resultStart...])) }
        kept.append(UInt8(ascii: "\n"))
        self.stamp = stamp
    }

    /// Forgets the answer; the token's bytes in it are overwritten.
    mutating func clear() {
        kept.withUnsafeMutableBytes { SecretBytes.wipe($0) }
        kept.removeAll(keepingCapacity: true)
        suffixStart = 0
        restStart = 0
        stamp = nil
    }

    /// The kept answer for `line`, when `line` is the kept line but for its id and
    /// `stands(stamp)`: `body` is lent its three parts — the beginning up to the id, the id
    /// as the full path writes it, and the rest with the newline — and its result returned.
    /// Nil otherwise; an answer that no longer stands is forgotten.
    mutating func answer<T>(_ line: UnsafeRawBufferPointer, stands: (CacheHitStamp) -> Bool,
                            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> T) -> T? {
        guard let stamp, let id = id(ifSameRequest: line) else { return nil }
        guard stands(stamp) else {
            clear()
            return nil
        }
        return kept.withUnsafeBytes { kept in
            body(UnsafeRawBufferPointer(start: Self.head.utf8Start, count: Self.head.utf8CodeUnitCount), id,
                 UnsafeRawBufferPointer(rebasing: kept[restStart...]))
        }
    }

    /// The id of `line` as the full path writes it (`ResponseWriter.head`), when `line` is
    /// the kept line but for its id; else nil.
    func id(ifSameRequest line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        kept.withUnsafeBytes { kept in
            let prefix = UnsafeRawBufferPointer(rebasing: kept[0..<suffixStart])
            let suffix = UnsafeRawBufferPointer(rebasing: kept[suffixStart..<restStart])
            guard line.count > prefix.count + suffix.count else { return nil }
            let end = line.count - suffix.count
            guard Self.same(prefix, UnsafeRawBufferPointer(rebasing: line[0..<prefix.count])),
                  Self.same(suffix, UnsafeRawBufferPointer(rebasing: line[end...]))
            else { return nil }
            return Self.written(id: UnsafeRawBufferPointer(rebasing: line[prefix.count..<end]))
        }
    }

    /// Whether `a` and `b`, of the same length, hold the same bytes.
    private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == b.count }
        return memcmp(x, y, a.count) == 0
    }

    private static let zero: StaticString = "0"

    /// `value` as the full path writes it when it is one whole id of the forms the scanner
    /// reads (`RequestScanner`), else nil: null; an integer of at most 18 digits,
    /// `-?(0|[1-9][0-9]*)`, written back as it is but for `-0`, which is 0; a string of
    /// printable ASCII without `"` or `\`, which JSON escapes nothing of, so it is
    /// written back as it is too.
    static func written(id value: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let first = value.first else { return nil }
        if first == UInt8(ascii: "\"") {
            guard value.count >= 2, value[value.count - 1] == UInt8(ascii: "\"") else { return nil }
            let text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 1)])
            guard text.allSatisfy({ $0 >= 0x20 && $0 < 0x80 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return nil }
            return value
        }
        if first == UInt8(ascii: "n") { return value.elementsEqual("null".utf8) ? value : nil }
        let negative = first == UInt8(ascii: "-")
        let digits = UnsafeRawBufferPointer(rebasing: value[(negative ? 1 : 0)...])
        guard (1...18).contains(digits.count), digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              !(digits.count > 1 && digits[0] == UInt8(ascii: "0"))
        else { return nil }
        if negative && digits[0] == UInt8(ascii: "0") { return UnsafeRawBufferPointer(start: zero.utf8Start, count: 1) }
        return value
    }
}
