@testable import BrokerServer
import XCTest

/// The sign-in listener's reading of a request head: what a browser sends is read whole
/// however it is split, and what is not an HTTP/1.x head, or is over the limits, is refused
/// (the listener answers 400) as soon as that shows.
final class RedirectRequestHeadTests: XCTestCase {
    /// What Chromium sent for a redirect to the listener (the query shortened).
    private let browser = "GET /callback?code=abc&state=xyz HTTP/1.1\r\nHost: 127.0.0.1:41234\r\nConnection: keep-alive\r\n"
        + "sec-ch-ua: \"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\"\r\nsec-ch-ua-mobile: ?0\r\n"
        + "Upgrade-Insecure-Requests: 1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) HeadlessChrome/131.0.0.0\r\n"
        + "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8\r\nSec-Fetch-Site: cross-site\r\n"
        + "Accept-Encoding: gzip, deflate, br\r\nAccept-Language: en-US\r\n\r\n"

    private func read(_ chunks: [String]) -> RedirectRequestHead.Reading {
        var reader = RedirectRequestHead.Reader()
        var last = RedirectRequestHead.Reading.incomplete
        for chunk in chunks { last = reader.read(Array(chunk.utf8)) }
        return last
    }

    private var callback: RedirectRequestHead.Reading {
        .head(RedirectRequestHead(method: "GET", target: "/callback?code=abc&state=xyz"))
    }

    func testABrowsersHeadIsReadInOneChunkOrByteByByte() {
        XCTAssertEqual(read([browser]), callback)
        XCTAssertEqual(read(browser.map { String($0) }), callback)
        // Split inside the CRLF that ends the head.
        XCTAssertEqual(read([String(browser.dropLast()), "\n"]), callback)
        XCTAssertEqual(read([String(browser.dropLast(3))]), .incomplete)
    }

    /// However the input is split, the reading is the one of the whole: for heads, for heads
    /// with bytes changed at random, and for random bytes.
    func testAnySplitReadsAsTheWhole() {
        var rng = SystemRandomNumberGenerator()
        let samples: [[UInt8]] = [Array(browser.utf8), Array("GET / HTTP/1.0\nA:b\n\n".utf8), Array("\r\nPOST /x HTTP/1.1\r\n\r\n".utf8)]
        for round in 0..<2_000 {
            var bytes = samples[round % samples.count]
            if round % 2 == 1 {
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            }
            if round % 7 == 0 { bytes = (0..<Int.random(in: 1...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
            var whole = RedirectRequestHead.Reader()
            let expected = whole.read(bytes)
            var split = RedirectRequestHead.Reader()
            var rest = bytes[...]
            var got = RedirectRequestHead.Reading.incomplete
            while !rest.isEmpty {
                let n = Int.random(in: 1...rest.count, using: &rng)
                got = split.read(rest.prefix(n))
                rest = rest.dropFirst(n)
            }
            XCTAssertEqual(got, expected, "\(bytes)")
        }
    }

    func testBareLineFeedsAndEmptyLinesBeforeTheRequestLineAreRead() {
        XCTAssertEqual(read(["GET /callback?code=abc&state=xyz HTTP/1.0\nHost: x\n\n"]), callback)
        XCTAssertEqual(read(["\r\n\r\nGET /callback?code=abc&state=xyz HTTP/1.1\r\n\r\n"]), callback)
    }

    func testWhatFollowsTheHeadIsNotLookedAt() {
        var reader = RedirectRequestHead.Reader()
        XCTAssertEqual(reader.read(Array((browser + "\u{0}\u{1}garbage").utf8)), callback)
        XCTAssertEqual(reader.read(Array("\u{16}\u{3}\u{1}".utf8)), callback)
    }

    func testOtherMethodsAreReadForTheListenerToRefuse() {
        XCTAssertEqual(read(["POST /callback HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"]),
                       .head(RedirectRequestHead(method: "POST", target: "/callback")))
    }

    func testWhatIsNotAnHTTP1RequestHeadIsRefused() {
        let refused = [
            "\u{16}\u{3}\u{1}\u{2}\u{0}",                       // a TLS handshake: at once, with no line end
            "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",                 // HTTP/2 with prior knowledge
            "GET /callback HTTP/1.1 extra\r\n\r\n",
            "GET  /callback HTTP/1.1\r\n\r\n",
            "GET /callback\r\n\r\n",                            // HTTP/0.9
            "GET /call back HTTP/1.1\r\n\r\n",
            "GET /callback HTTP/1.1\r\nHost : x\r\n\r\n",       // space before the colon (RFC 9112 §5.1)
            "GET /callback HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",  // line folding (§5.2)
            "GET /callback HTTP/1.1\r\nno colon here\r\n\r\n",
            "GET /callback HTTP/1.1\r\nX: a\u{0}b\r\n\r\n",
            "G\u{0}T /callback HTTP/1.1",
        ]
        for head in refused {
            XCTAssertEqual(read([head]), .invalid, head.debugDescription)
        }
    }

    func testAHeadOverTheLimitsIsRefusedNotReadOnAndOn() {
        let longLine = "GET /callback?" + String(repeating: "a", count: RedirectRequestHead.maxLineBytes) + " HTTP/1.1\r\n\r\n"
        XCTAssertEqual(read([longLine]), .invalid)
        let header = "X-Filler: " + String(repeating: "b", count: 1000) + "\r\n"
        let tooLong = "GET /callback HTTP/1.1\r\n" + String(repeating: header, count: 50) + "\r\n"
        XCTAssertEqual(read([tooLong]), .invalid)
        let tooMany = "GET /callback HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: RedirectRequestHead.maxHeaderCount + 1) + "\r\n"
        XCTAssertEqual(read([tooMany]), .invalid)
        let asMany = "GET /callback HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: RedirectRequestHead.maxHeaderCount) + "\r\n"
        XCTAssertEqual(read([asMany]), .head(RedirectRequestHead(method: "GET", target: "/callback")))
    }

    func testTheResponseIsOneHTTP11AnswerThatClosesTheConnection() {
        let page = "<p>é</p>"
        let response = RedirectHTTPHandler.response(status: 200, html: page)
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        XCTAssertTrue(response.contains("\r\nContent-Length: \(page.utf8.count)\r\n"))
        XCTAssertTrue(response.contains("\r\nContent-Type: text/html; charset=utf-8\r\n"))
        XCTAssertTrue(response.hasSuffix("\r\nConnection: close\r\n\r\n" + page))
        let refused = RedirectHTTPHandler.response(status: 405, html: nil)
        XCTAssertTrue(refused.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        XCTAssertTrue(refused.contains("\r\nAllow: GET\r\n"))
        XCTAssertTrue(refused.contains("\r\nContent-Length: 0\r\n"))
        XCTAssertFalse(refused.contains("\r\nContent-Type:"))
    }
}
