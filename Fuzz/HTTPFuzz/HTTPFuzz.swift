// libFuzzer target for the HTTP client's response parser: what a provider (or anything on
// the path to it) answers. Built by `scripts/fuzz http`, not by SwiftPM, together with
// Fuzz/Properties/HTTPProperties.swift (the properties, which `swift test` also replays over
// Fuzz/http-corpus) and the HTTPClient module's own sources, by path, so it tests the code
// the daemon runs. A failed property stops the run with `fatalError`, which libFuzzer
// records as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func httpFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data, size > 0 else { return 0 }
    if let problem = httpInputProblem(Array(UnsafeBufferPointer(start: data, count: size))) { fatalError(problem) }
    return 0
}
