// The properties the HTTP response parser's fuzz target checks (Fuzz/HTTPFuzz), in one place
// that both it and `swift test` (Fuzz/Replay, over Fuzz/http-corpus) call. scripts/fuzz
// compiles this file with the HTTPClient module's own sources, by path; the Swift test
// reaches the same code in HTTPClient.
//
// The first input byte picks how many bytes each read returns (1…256) and whether the
// request was a HEAD; the rest is the stream the server sent. Properties:
// - the parser never crashes, and never returns a body over its limit;
// - the outcome does not depend on how the bytes arrive: read a few bytes at a time and
//   read 16 KiB at a time, the same bytes give the same response or the same error;
// - a response is a final one (not 1xx, other than 101), with lowercased header names.
#if canImport(HTTPClient)
@testable import HTTPClient
#endif

/// The bytes of one input, handed out `step` bytes per read.
final class ReplayStream: ByteStream {
    private let bytes: [UInt8]
    private let step: Int
    private var offset = 0

    init(_ bytes: [UInt8], step: Int) {
        self.bytes = bytes
        self.step = step
    }

    func write(_ bytes: [UInt8]) throws(HTTPClientError) {}

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(HTTPClientError) -> Int {
        let count = min(step, bytes.count - offset, buffer.count)
        guard count > 0 else { return 0 }
        bytes.withUnsafeBytes { raw in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + count)]))
        }
        offset += count
        return count
    }
}

/// A small limit, so inputs reach the over-the-limit paths too.
let httpBodyLimit = 2048

func parseReplayed(_ bytes: [UInt8], step: Int, method: String) -> Result<HTTPClient.Response, HTTPClientError> {
    var parser = ResponseParser(stream: ReplayStream(bytes, step: step), host: "fuzz.example:443", limit: httpBodyLimit)
    do throws(HTTPClientError) {
        return .success(try parser.readResponse(method: method))
    } catch {
        return .failure(error)
    }
}

/// What is wrong with how the parser reads `input` (control byte, then the stream), or nil
/// when every property holds.
func httpInputProblem(_ input: [UInt8]) -> String? {
    guard let control = input.first else { return nil }
    let stream = Array(input.dropFirst())
    let method = control & 0x80 != 0 ? "HEAD" : "GET"
    let step = Int(control & 0x7F) * 2 + 1
    let trickle = parseReplayed(stream, step: step, method: method)
    let whole = parseReplayed(stream, step: 16 * 1024, method: method)
    guard trickle == whole else {
        return "the same bytes parsed differently when read \(step) at a time: \(trickle) vs \(whole)"
    }
    if case .success(let response) = whole {
        guard response.body.count <= httpBodyLimit else { return "a body over the limit was returned" }
        guard !(100...199).contains(response.status) || response.status == 101 else {
            return "an interim response was returned as the answer"
        }
        guard response.headers.keys.allSatisfy({ $0 == $0.lowercased() }) else {
            return "a header name was not lowercased"
        }
    }
    return nil
}
