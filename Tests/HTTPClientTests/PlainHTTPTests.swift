import Foundation
@testable import HTTPClient
import XCTest

final class PlainHTTPTests: XCTestCase {
    private var server: ScriptServer!
    private var base: String { "http://127.0.0.1:\(server.port)" }
    private var host: String { "127.0.0.1:\(server.port)" }

    override func setUpWithError() throws { server = try ScriptServer("origin_server.py") }
    override func tearDown() { server?.stop() }

    func testGetSendsTheRequestLineAndHeaders() async throws {
        let response = try await testClient().send(method: "GET", url: base + "/echo?x=1&y=%20", headers: ["X-Custom": "v1"])
        XCTAssertEqual(response.status, 200)
        let lines = text(response).components(separatedBy: "\r\n")
        XCTAssertEqual(lines.first, "GET /echo?x=1&y=%20 HTTP/1.1")
        for field in ["Host: \(host)", "User-Agent: authbroker", "Accept-Encoding: identity", "Connection: close", "X-Custom: v1"] {
            XCTAssertTrue(lines.contains(field), field)
        }
        XCTAssertFalse(lines.contains { $0.lowercased().hasPrefix("content-length") })
    }

    func testPostSendsItsBodyWithContentLength() async throws {
        let body = Array("grant_type=refresh_token&x=%C3%A9".utf8)
        let response = try await testClient().send(method: "POST", url: base + "/echo",
                                                   headers: ["Content-Type": "application/x-www-form-urlencoded", "Host": "ignored"],
                                                   body: body)
        let echoed = text(response)
        XCTAssertTrue(echoed.hasPrefix("POST /echo HTTP/1.1\r\n"))
        XCTAssertTrue(echoed.contains("\r\nContent-Length: \(body.count)\r\n"))
        XCTAssertTrue(echoed.contains("\r\nHost: \(host)\r\n"))
        XCTAssertFalse(echoed.contains("ignored"))
        XCTAssertTrue(echoed.hasSuffix("\r\n\r\n" + String(decoding: body, as: UTF8.self)))
    }

    func testBodiesFramedEveryWay() async throws {
        let client = testClient()
        let chunked = try await client.send(method: "GET", url: base + "/chunked")
        XCTAssertEqual(text(chunked), "hello, world")
        XCTAssertEqual(chunked.headers["transfer-encoding"], "chunked")
        let closed = try await client.send(method: "GET", url: base + "/close")
        XCTAssertEqual(text(closed), "until the end")
        let sized = try await client.send(method: "GET", url: base + "/big?n=300000")
        XCTAssertEqual(sized.body, [UInt8](repeating: 0x61, count: 300_000))
    }

    func testInterimResponsesAreSkipped() async throws {
        let response = try await testClient().send(method: "GET", url: base + "/interim")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(text(response), "final")
        XCTAssertNil(response.headers["link"])
    }

    func testHeaderNamesAreLowercasedAndRepeatsJoined() async throws {
        let response = try await testClient().send(method: "GET", url: base + "/headers")
        XCTAssertEqual(response.headers["x-mixed-case"], "A")
        XCTAssertEqual(response.headers["set-thing"], "1, 2")
        XCTAssertNil(response.headers["X-Mixed-Case"])
    }

    func testRedirectsAreReturnedNotFollowed() async throws {
        let response = try await testClient().send(method: "GET", url: base + "/redirect")
        XCTAssertEqual(response.status, 302)
        XCTAssertEqual(response.headers["location"], "/echo")
        XCTAssertEqual(response.body, [])
    }

    func testBodiesOverTheLimitAreRefused() async {
        let client = testClient(limit: 1000)
        for path in ["/big?n=1001", "/bigchunked?n=5000", "/bigclose?n=5000"] {
            let error = await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: base + path) }
            XCTAssertEqual(error, .bodyTooLarge(host: host, limit: 1000), path)
        }
        let exact = try? await client.send(method: "GET", url: base + "/big?n=1000")
        XCTAssertEqual(exact?.body.count, 1000)
    }

    /// An endless response head is cut at 64 KiB and called what it is: the sentence must
    /// not claim a body beyond the body limit (1 MiB for providers) the server never sent.
    func testAnEndlessHeadIsNamedAsSuch() async {
        let error = await expectError { () async throws(HTTPClientError) in
            try await testClient(limit: 1 << 20).send(method: "GET", url: base + "/bighead")
        }
        let message = error?.message ?? ""
        XCTAssertEqual(message, "\(host) sent response header fields larger than 64 KiB", message)
    }

    func testGarbageIsNotHTTP() async {
        let error = await expectError { () async throws(HTTPClientError) in try await testClient().send(method: "GET", url: base + "/garbage") }
        XCTAssertEqual(error, .notHTTP(host: host))
        XCTAssertEqual(error?.message, "\(host) answered something that is not HTTP")
    }

    func testChunkSizesAreHexDigitsOnly() async {
        for path in ["/chunk-minus", "/chunk-plus", "/chunk-0x", "/chunk-space"] {
            let error = await expectError { () async throws(HTTPClientError) in try await testClient().send(method: "GET", url: base + path) }
            XCTAssertEqual(error, .notHTTP(host: host), path)
        }
    }

    func testAConnectionClosedMidBodyIsLost() async {
        let error = await expectError { () async throws(HTTPClientError) in try await testClient().send(method: "GET", url: base + "/truncated") }
        XCTAssertEqual(error, .connectionLost(host: host))
    }

    func testConnectionRefusedNamesOnlyTheHost() async throws {
        let port = server.port
        server.stop()
        server = nil
        let error = await expectError { () async throws(HTTPClientError) in
            try await testClient().send(method: "GET", url: "http://127.0.0.1:\(port)/token?code=secret-code")
        }
        XCTAssertEqual(error, .connectionRefused(host: "127.0.0.1:\(port)"))
        XCTAssertFalse(error?.message.contains("secret") ?? true)
    }

    func testAServerThatNeverAnswersTimesOut() async {
        let error = await expectError { () async throws(HTTPClientError) in
            try await testClient(timeout: 1).send(method: "GET", url: base + "/hang")
        }
        XCTAssertEqual(error, .timedOut(host: host))
    }

    func testARequestsOwnTimeoutReplacesTheClients() async {
        let error = await expectError { () async throws(HTTPClientError) in
            try await testClient(timeout: 60).send(method: "GET", url: base + "/hang", timeout: 1)
        }
        XCTAssertEqual(error, .timedOut(host: host), "a refresh's deadline (refresh_timeout) is its own")
    }

    func testAnAnswerTimeoutReadsALateAnswerOnceTheRequestIsWritten() async throws {
        // A refresh's caller waits refresh_timeout; the daemon reads the answer longer
        // (Refresher.lateAnswerWindow): the request was written, the provider may act on it.
        let late = try await testClient(timeout: 60).send(method: "GET", url: base + "/late", timeout: 0.5, answerTimeout: 10)
        XCTAssertEqual(text(late), "late")
        let error = await expectError { () async throws(HTTPClientError) in
            try await testClient(timeout: 60).send(method: "GET", url: base + "/late", timeout: 0.5)
        }
        XCTAssertEqual(error, .timedOut(host: host), "without one, the request's own timeout bounds the answer")
    }

    func testCancellationStopsAHangingRequest() async {
        let url = base + "/hang"
        let task = Task { () async -> HTTPClientError? in
            await expectError { () async throws(HTTPClientError) in try await testClient(timeout: 60).send(method: "GET", url: url) }
        }
        try? await Task.sleep(for: .milliseconds(300))
        task.cancel()
        let error = await task.value
        XCTAssertEqual(error, .cancelled(host: host))
    }

    func testAnAlreadyCancelledTaskSendsNothing() async {
        let url = base + "/echo"
        let task = Task { () async -> HTTPClientError? in
            while !Task.isCancelled { await Task.yield() }
            return await expectError { () async throws(HTTPClientError) in try await testClient().send(method: "GET", url: url) }
        }
        task.cancel()
        let error = await task.value
        XCTAssertEqual(error, .cancelled(host: host))
    }

    func testManyRequestsAtOnceLeaveNoDescriptorsBehind() async throws {
        let client = testClient()
        let url = base + "/chunked"
        let before = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { text(try await client.send(method: "GET", url: url)) } }
            for try await body in group { XCTAssertEqual(body, "hello, world") }
        }
        _ = await expectError { () async throws(HTTPClientError) in try await client.send(method: "GET", url: self.base + "/garbage") }
        // At most as many as before: an earlier test's cancelled request may still be
        // closing its socket on its own thread when this one starts, never opening one.
        XCTAssertLessThanOrEqual(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count, before)
    }
}
