// libFuzzer target for the TOML reader (the daemon's config.toml). Built by
// `scripts/fuzz toml`, not by SwiftPM, together with Fuzz/Properties/TOMLProperties.swift
// (the properties, which `swift test` also replays over Fuzz/toml-corpus) and the TOML
// module's own sources, by path, so it tests the code the daemon runs. A failed property
// stops the run with `fatalError`, which libFuzzer records as a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func tomlFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let data else { return 0 }
    if let problem = tomlInputProblem(Array(UnsafeBufferPointer(start: data, count: size))) { fatalError(problem) }
    return 0
}
