@testable import HTTPClient
import XCTest

/// Runs `body`, which must throw an `HTTPClientError`, and returns that error.
func expectError<T>(_ body: () async throws(HTTPClientError) -> T, file: StaticString = #filePath,
                    line: UInt = #line) async -> HTTPClientError? {
    do {
        _ = try await body()
        XCTFail("expected an HTTPClientError", file: file, line: line)
        return nil
    } catch {
        return error
    }
}

/// A client that ignores the environment's proxies and trusts `caFile` (or nothing).
func testClient(timeout: Double = 5, limit: Int = 1 << 20, proxies: ProxySettings = .none,
                caFile: String = "/nonexistent") -> HTTPClient {
    HTTPClient(timeout: timeout, maximumBodySize: limit, proxies: proxies, trust: .caFile(caFile))
}

/// The text of a body.
func text(_ response: HTTPClient.Response) -> String { String(decoding: response.body, as: UTF8.self) }
