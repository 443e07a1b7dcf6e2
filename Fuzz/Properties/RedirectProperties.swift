// The properties the sign-in port's request-head fuzz target checks (Fuzz/RedirectFuzz), in
// one place that both it and `swift test` (Fuzz/Replay, over Fuzz/redirect-corpus) call.
// scripts/fuzz compiles this file with BrokerServer's RedirectRequestHead.swift, by path
// (and HTTPClient's HTTPToken.swift as the module it imports); the Swift test reaches the
// same code in BrokerServer. Any local uid can reach a sign-in's loopback port, so its
// reader meets whatever bytes a process sends.
//
// The first input byte picks the size of each read (1…64, or the whole input); the rest is
// what the peer sent. Properties:
// - the reader never crashes, and reads no more than its limits (a head is found within
//   the first `maxBytes` bytes);
// - the reading does not depend on how the bytes arrive: the whole at once, in reads of the
//   chosen size and byte by byte give the same result;
// - once the result is a head or a refusal, more input changes nothing;
// - a head's method is a token and its target printable ASCII without spaces, and the input
//   holds its request line as read (after any empty lines).
#if canImport(BrokerServer)
@testable import BrokerServer
#endif
#if canImport(HTTPClient)
import HTTPClient
#endif

/// The reading of `bytes` handed to a new reader `step` bytes at a time.
func redirectReading(_ bytes: ArraySlice<UInt8>, step: Int) -> RedirectRequestHead.Reading {
    var reader = RedirectRequestHead.Reader()
    var rest = bytes
    var last = RedirectRequestHead.Reading.incomplete
    repeat {
        last = reader.read(rest.prefix(step))
        rest = rest.dropFirst(step)
    } while !rest.isEmpty
    return last
}

/// What is wrong with how the sign-in port reads `input`, or nil when every property holds.
func redirectInputProblem(_ input: [UInt8]) -> String? {
    guard let first = input.first else { return nil }
    let bytes = input.dropFirst()
    let step = first >= 64 ? max(1, bytes.count) : Int(first) + 1
    let whole = redirectReading(bytes, step: max(1, bytes.count))
    let chunked = redirectReading(bytes, step: step)
    guard chunked == whole else { return "read in pieces of \(step) bytes: \(chunked), whole: \(whole)" }
    if bytes.count <= 4096 {
        let single = redirectReading(bytes, step: 1)
        guard single == whole else { return "read byte by byte: \(single), whole: \(whole)" }
    }
    // More input after a result changes nothing.
    var reader = RedirectRequestHead.Reader()
    let done = reader.read(bytes)
    if done != .incomplete {
        let after = reader.read(Array("GET / HTTP/1.1\r\n\r\n".utf8))
        guard after == done else { return "more input after \(done) changed it to \(after)" }
    }
    guard case .head(let head) = whole else { return nil }
    guard !head.method.isEmpty, head.method.utf8.allSatisfy(HTTPToken.isByte) else { return "a head with the method \(head.method.debugDescription)" }
    guard !head.target.isEmpty, head.target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return "a head with the target \(head.target.debugDescription)" }
    let line = Array("\(head.method) \(head.target) HTTP/1.".utf8)
    var start = bytes.startIndex
    while start < bytes.endIndex, bytes[start] == UInt8(ascii: "\r") || bytes[start] == UInt8(ascii: "\n") { start += 1 }
    guard bytes[start...].starts(with: line) else { return "a head whose request line is not the input's first line" }
    // A head is found within the limit: the same bytes cut at it are still a head.
    guard redirectReading(bytes.prefix(RedirectRequestHead.maxBytes), step: max(1, bytes.count)) == whole else {
        return "a head read past \(RedirectRequestHead.maxBytes) bytes"
    }
    return nil
}
