// The properties the request-decoding fuzz target checks (Fuzz/RPCFuzz), in one place that
// both it and `swift test` (Fuzz/Replay, over Fuzz/corpus) call. scripts/fuzz compiles this
// file together with BrokerServer's LineFraming.swift, RequestScanner.swift and
// ResponseWriter.swift, by path; the Swift test reaches the same code in BrokerServer.
//
// Each input is a byte stream as a client would write it to the socket. For every line:
// - the one-pass scanner (the daemon's fast path) and JSONDecoder (its fallback) must not
//   crash, and when the scanner accepts a line, JSONDecoder must read the same header
//   (jsonrpc, id, whether there is an id, method) and the same token.get params: the
//   scanner promises to give up on anything it would read differently;
// - an id read from the line, written back by ResponseWriter (the fast path's encoder)
//   together with strings taken from the line, must parse as JSON and give back the same
//   values.
#if canImport(BrokerServer)
@testable import BrokerServer
#endif
import BrokerProtocol
import Foundation

/// The daemon's cap on one request line (docs/protocol.md).
let rpcLineCap = 64 * 1024

/// What is wrong with how the daemon frames and decodes `input`, or nil when every property
/// holds.
func rpcInputProblem(_ input: UnsafeRawBufferPointer) -> String? {
    var input = input
    // The daemon's own framing (LineFraming.swift), then the decoding of each line.
    while !input.isEmpty {
        switch LineFraming.next(input, maxLength: rpcLineCap) {
        case .line(let length, let consumed):
            guard length >= 0, length < consumed, consumed <= input.count else { return "the framing returned an impossible line" }
            if length > 0, let problem = rpcLineProblem(UnsafeRawBufferPointer(rebasing: input[0..<length])) { return problem }
            input = UnsafeRawBufferPointer(rebasing: input[consumed...])
        case .tooLong:
            return nil  // refused before any decoding; the connection is closed
        case .needMoreData:
            // A last line without its `\n` counts when the client half-closes.
            // A `\r` at the end may be the one before the `\n` still to come: not counted.
            guard input.count - (input.last == UInt8(ascii: "\r") ? 1 : 0) <= rpcLineCap else { return "the framing waits for more past the cap" }
            return rpcLineProblem(input)
        }
    }
    return nil
}

func rpcLineProblem(_ line: UnsafeRawBufferPointer) -> String? {
    let decoder = JSONDecoder()
    let data = Data(line)
    let scanned = ScannedRequest.scan(line)
    let header = try? decoder.decode(RequestHeader.self, from: data)
    let params = try? decoder.decode(RequestParams<TokenGetParams>.self, from: data)
    // The other methods' params: only that they decode or fail, never crash.
    _ = try? decoder.decode(RequestParams<LoginStartParams>.self, from: data)
    _ = try? decoder.decode(RequestParams<LoginWaitParams>.self, from: data)
    _ = try? decoder.decode(RequestParams<LogoutParams>.self, from: data)
    _ = try? decoder.decode(RequestParams<AccountParams>.self, from: data)
    _ = try? decoder.decode(RequestParams<SetSecretParams>.self, from: data)

    if let scanned {
        guard let header else { return "the scanner read a line JSONDecoder refuses as a request" }
        guard scanned.jsonrpc == header.jsonrpc, scanned.method == header.method,
              scanned.hasID == header.hasID, (scanned.id ?? .null) == (header.id ?? .null)
        else { return "the scanner and JSONDecoder read different request headers" }
        if let fast = TokenGetParams(scanned: scanned) {
            guard let params else { return "the scanner read token.get params JSONDecoder refuses" }
            guard fast == (params.params ?? TokenGetParams()) else {
                return "the scanner and JSONDecoder read different token.get params"
            }
        }
    }
    if let id = header?.id {
        return rpcRoundTripProblem(id, text: header?.method ?? String(decoding: line.prefix(256), as: UTF8.self))
    }
    return nil
}

/// Writes a token.get answer with ResponseWriter and reads it back with JSONDecoder.
func rpcRoundTripProblem(_ id: RequestID, text: String) -> String? {
    let result = TokenGetResult(accessToken: text, tokenType: "Bearer", expiresAt: 1, scope: text,
                                resource: text, provider: text, account: text)
    let written = ResponseWriter.success(id, result)
    guard let back = try? JSONDecoder().decode(RPCEcho.self, from: written) else {
        return "ResponseWriter wrote a line that is not a JSON-RPC response"
    }
    guard back.id == id, back.result.access_token == text, back.result.scope == text,
          back.result.resource == text, back.result.provider == text
    else { return "ResponseWriter changed a value on the way out" }
    return nil
}

/// A token.get answer as a client reads it back.
struct RPCEcho: Decodable {
    struct Result: Decodable {
        var access_token: String
        var scope: String?
        var resource: String?
        var provider: String
    }
    var id: RequestID
    var result: Result
}
