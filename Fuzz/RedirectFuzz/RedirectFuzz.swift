// libFuzzer target for the request-head reader of a browser sign-in's loopback port
// (BrokerServer's RedirectRequestHead, which any local uid can reach). Built by
// `scripts/fuzz redirect`, not by SwiftPM, together with Fuzz/Properties/RedirectProperties.swift
// (the properties, which `swift test` also replays over Fuzz/redirect-corpus) and
// BrokerServer's own RedirectRequestHead.swift, by path, so it tests the code the daemon
// runs. A failed property stops the run with `fatalError`, which libFuzzer records as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func redirectFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    if let problem = redirectInputProblem(Array(UnsafeBufferPointer(start: data, count: size))) { fatalError(problem) }
    return 0
}
