import BrokerProtocol
import Foundation

// libFuzzer target for the daemon's request framing and decoding (built by scripts/fuzz,
// not by SwiftPM). It is compiled together with BrokerServer's own LineFraming.swift,
// RequestScanner.swift and ResponseWriter.swift, by path, so it tests the code the daemon
// runs, not a copy.
//
// Each input is a byte stream as a client would write it to the socket. For every line:
// - the one-pass scanner (the daemon's fast path) and JSONDecoder (its fallback) must not
//   crash, and when the scanner accepts a line, JSONDecoder must read the same header
//   (jsonrpc, id, whether there is an id, method) and the same token.get params: the
//   scanner promises to give up on anything it would read differently;
// - an id read from the line, written back by ResponseWriter (the fast path's encoder)
//   together with strings taken from the line, must parse as JSON and give back the same
//   values.
// A failed property stops the run with `fatalError`, which libFuzzer records as a crash.

/// The daemon's cap on one request line (docs/protocol.md).
let lineCap = 64 * 1024

@_cdecl("LLVMFuzzerTestOneInput")
public func rpcFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    var input = UnsafeRawBufferPointer(start: data, count: size)
    // The daemon's own framing (LineFraming.swift), then the decoding of each line.
    while !input.isEmpty {
        switch LineFraming.next(input, maxLength: lineCap) {
        case .line(let length, let consumed):
            guard length >= 0, length < consumed, consumed <= input.count else { fatalError("the framing returned an impossible line") }
            if length > 0 { checkLine(UnsafeRawBufferPointer(rebasing: input[0..<length])) }
            input = UnsafeRawBufferPointer(rebasing: input[consumed...])
        case .tooLong:
            return 0  // refused before any decoding; the connection is closed
        case .needMoreData:
            // A last line without its `\n` counts when the client half-closes.
            guard input.count <= lineCap else { fatalError("the framing waits for more past the cap") }
            checkLine(input)
            return 0
        }
    }
    return 0
}

func checkLine(_ line: UnsafeRawBufferPointer) {
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
        guard let header else { fatalError("the scanner read a line JSONDecoder refuses as a request") }
        guard scanned.jsonrpc == header.jsonrpc, scanned.method == header.method,
              scanned.hasID == header.hasID, (scanned.id ?? .null) == (header.id ?? .null)
        else { fatalError("the scanner and JSONDecoder read different request headers") }
        if let fast = TokenGetParams(scanned: scanned) {
            guard let params else { fatalError("the scanner read token.get params JSONDecoder refuses") }
            guard fast == (params.params ?? TokenGetParams()) else {
                fatalError("the scanner and JSONDecoder read different token.get params")
            }
        }
    }
    if let id = header?.id {
        roundTrip(id, text: header?.method ?? String(decoding: line.prefix(256), as: UTF8.self))
    }
}

/// Writes a token.get answer with ResponseWriter and reads it back with JSONDecoder.
func roundTrip(_ id: RequestID, text: String) {
    let result = TokenGetResult(accessToken: text, tokenType: "Bearer", expiresAt: 1, scope: text,
                                resource: text, provider: text, account: text)
    let written = ResponseWriter.success(id, result)
    guard let back = try? JSONDecoder().decode(Echo.self, from: written) else {
        fatalError("ResponseWriter wrote a line that is not a JSON-RPC response")
    }
    guard back.id == id, back.result.access_token == text, back.result.scope == text,
          back.result.resource == text, back.result.provider == text
    else { fatalError("ResponseWriter changed a value on the way out") }
}

struct Echo: Decodable {
    struct Result: Decodable {
        var access_token: String
        var scope: String?
        var resource: String?
        var provider: String
    }
    var id: RequestID
    var result: Result
}
