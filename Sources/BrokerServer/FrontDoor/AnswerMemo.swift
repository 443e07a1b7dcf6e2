#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The front door's last few cache-hit answers, each kept with the request line it
/// answered, so that the same request (the same line but for its id: a caller asking for
/// its token again, or `authctl token` run again) is answered with the same bytes without
/// reading it again, while other callers ask in turn for other tokens (kubectl for one
/// resource, git for another, a client on its own connection for a third).
///
/// Why: a cache hit made Strings of the request's values, resolved the account, hashed the
/// cache key under three locks and wrote the answer: ~25 000 instructions per request, most
/// of the front door's own time per request (docs/performance.md, "Profiling"). A caller
/// asks for the same token again and again; with one answer kept, two callers in turn
/// never met theirs.
///
/// Exact: an answer is a function of the line (the id aside) and of what its stamp
/// (`CacheHitStamp`) stands for. The line is compared byte for byte around the id, and the
/// id must be one value of the forms the scanner reads, so the line would scan the same;
/// the stamp is asked (`TokensService.stillServes`) on every use, and it stops holding with
/// every change to the cache, the accounts or the configuration and when the token's life
/// runs short for the request. Only ever asked where the front door serves the request
/// itself, which it does only while no `[[allow]]` rule is in force (the caller gate has
/// nothing to ask then). Belongs to the front door's thread.
///
/// Found by comparing the line with each kept one, most recently used first (a request
/// asked again and again is found at the first); hashing the line would first need the
/// id found in it, which is what the comparison spares. At most `capacity` answers of at
/// most `largestKept` bytes each: the memo never holds more than 8 × 16 KiB, whatever the
/// connections.
struct AnswerMemo {
    /// How many answers are kept: a machine's callers asking at once or in turn use a few
    /// tokens (one per resource, scope set and account); past eight, comparing every line
    /// with each would cost more than it spares, and the memory would grow.
    static let capacity = 8
    /// The largest answer kept, with its line: real tokens (JWTs of 1–8 KB) fit; a larger
    /// one costs the full path, next to which its copying is no longer small anyway.
    static let largestKept = 16 * 1024

    /// One kept answer.
    fileprivate struct Entry {
        /// The line up to the id's value, the line after it, and the answer after its id
        /// (`,"result":{…}}`) with the newline, one after the other: one array, reused.
        var kept: [UInt8] = []
        /// Where the line after the id begins in `kept`, and where the answer's rest begins.
        var suffixStart = 0
        var restStart = 0
        /// What the answer rests on.
        var stamp = CacheHitStamp(generation: 0, deadline: 0, minimumLife: 0)
        /// What the answer is about, for the audit line of each use (nil: no trail).
        var audit: AuditSubject?
    }

    /// The kept answers, the most recently used first.
    private var entries: [Entry] = []

    /// Every answer's beginning, up to its id (`ResponseWriter.head`).
    private static let head: StaticString = #"{"jsonrpc":"2.0","id":"#

    /// Keeps `answer`, the answer of `line`, whose id lies at `idRange` in the line and whose
    /// part after the id begins at `resultStart`, as the most recently used: in a new entry
    /// while there is room, else in place of the least recently used, written over in its
    /// room (none of the answer it replaces is left). An answer larger than `largestKept`
    /// is not kept.
    mutating func keep(line: UnsafeRawBufferPointer, idRange: Range<Int>, answer: Data, resultStart: Int, stamp: CacheHitStamp,
                       audit: AuditSubject? = nil) {
        let prefix = UnsafeRawBufferPointer(rebasing: line[0..<idRange.lowerBound])
        let suffix = UnsafeRawBufferPointer(rebasing: line[idRange.upperBound...])
        let total = prefix.count + suffix.count + (answer.count - resultStart) + 1
        guard total <= Self.largestKept else { return }
        // No kept answer is this request's: the full path answers a request only when none
        // matched it (or the one that did no longer stood, and is gone), the scanner and
        // the memo reading the same ids (`AnswerMemoIDTests`).
        var entry = entries.count < Self.capacity ? Entry() : entries.removeLast()
        let kept = entry.kept.count
        if total < kept { entry.kept.withUnsafeMutableBytes { SecretBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: $0[total...])) } }
        entry.kept.removeAll(keepingCapacity: true)
        // Room for this answer exactly, not what growing by appends would double it to:
        // the memo's memory stays within `capacity` × `largestKept`.
        entry.kept.reserveCapacity(total)
        entry.kept.append(contentsOf: prefix)
        entry.suffixStart = entry.kept.count
        entry.kept.append(contentsOf: suffix)
        entry.restStart = entry.kept.count
        answer.withUnsafeBytes { entry.kept.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[resultStart...])) }
        entry.kept.append(UInt8(ascii: "\n"))
        entry.stamp = stamp
        entry.audit = audit
        entries.insert(entry, at: 0)
    }

    /// The kept answer for `line`, when `line` is a kept line but for its id and
    /// `stands(stamp)`: `body` is lent its three parts — the beginning up to the id, the id
    /// as the full path writes it, and the rest with the newline — and its result returned.
    /// Nil otherwise; an answer that no longer stands is forgotten, its bytes overwritten.
    @inline(__always)  // with its closures, into the front door's request path
    mutating func answer<T>(_ line: UnsafeRawBufferPointer, stands: (CacheHitStamp, AuditSubject?) -> Bool,
                            _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> T) -> T? {
        // Read in place (no uniqueness check, no copy); the list changes only when the
        // answer was not the most recently used, or no longer stands.
        let (index, answered): (Int, T?) = entries.withUnsafeBufferPointer { entries in
            // Each entry borrowed where it lies (`entries[index]`): a copy of one was ~100
            // instructions of value witnesses and reference counting.
            for index in entries.indices {
                guard let id = entries[index].id(ifSameRequest: line) else { continue }
                guard stands(entries[index].stamp, entries[index].audit) else { return (index, nil) }
                let restStart = entries[index].restStart
                let answered = entries[index].kept.withUnsafeBytes { kept in
                    body(UnsafeRawBufferPointer(start: Self.head.utf8Start, count: Self.head.utf8CodeUnitCount), id,
                         UnsafeRawBufferPointer(rebasing: kept[restStart...]))
                }
                return (index, answered)
            }
            return (-1, nil)
        }
        if let answered {
            if index > 0 { entries.withUnsafeMutableBufferPointer { $0.moveToFront(index) } }
            return answered
        }
        if index >= 0 {
            var gone = entries.remove(at: index)
            gone.kept.withUnsafeMutableBytes { SecretBytes.wipe($0) }
        }
        return nil
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

extension AnswerMemo.Entry {
    /// The id of `line` as the full path writes it (`ResponseWriter.head`), when `line` is
    /// the kept line but for its id; else nil.
    func id(ifSameRequest line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        kept.withUnsafeBytes { kept in
            let prefix = UnsafeRawBufferPointer(rebasing: kept[0..<suffixStart])
            let suffix = UnsafeRawBufferPointer(rebasing: kept[suffixStart..<restStart])
            guard line.count > prefix.count + suffix.count else { return nil }
            let end = line.count - suffix.count
            // The part after the id first: where requests for other tokens differ.
            guard Self.same(suffix, UnsafeRawBufferPointer(rebasing: line[end...])),
                  Self.same(prefix, UnsafeRawBufferPointer(rebasing: line[0..<prefix.count]))
            else { return nil }
            return AnswerMemo.written(id: UnsafeRawBufferPointer(rebasing: line[prefix.count..<end]))
        }
    }

    /// Whether `a` and `b`, of the same length, hold the same bytes.
    private static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == b.count }
        return memcmp(x, y, a.count) == 0
    }
}

extension UnsafeMutableBufferPointer {
    /// Puts the element at `index` first, the ones before it one later, in their order.
    fileprivate func moveToFront(_ index: Int) {
        for i in stride(from: index, to: 0, by: -1) { swapAt(i, i - 1) }
    }
}
