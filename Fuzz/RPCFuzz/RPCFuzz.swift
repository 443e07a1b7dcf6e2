// libFuzzer target for the daemon's request framing and decoding (built by scripts/fuzz,
// not by SwiftPM). It is compiled together with Fuzz/Properties/RPCProperties.swift (the
// properties, which `swift test` also replays over Fuzz/corpus) and BrokerServer's own
// LineFraming.swift, RequestScanner.swift and ResponseWriter.swift, by path, so it tests
// the code the daemon runs, not a copy.
// A failed property stops the run with `fatalError`, which libFuzzer records as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func rpcFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    if let problem = rpcInputProblem(UnsafeRawBufferPointer(start: data, count: size)) { fatalError(problem) }
    return 0
}
