@testable import HTTPClient
import XCTest

final class EndpointTests: XCTestCase {
    func testNamesAddressesPortsAndTargets() throws {
        let plain = try Endpoint("http://Example.COM/a/b?c=d#frag")
        XCTAssertEqual(plain.scheme, .http)
        XCTAssertEqual(plain.host, "example.com")
        XCTAssertEqual(plain.port, 80)
        XCTAssertEqual(plain.target, "/a/b?c=d")
        XCTAssertEqual(plain.displayName, "example.com")
        XCTAssertEqual(plain.hostHeader, "example.com")

        let withPort = try Endpoint("https://127.0.0.1:8443")
        XCTAssertEqual(withPort.port, 8443)
        XCTAssertEqual(withPort.target, "/")
        XCTAssertTrue(withPort.isIPLiteral)
        XCTAssertEqual(withPort.displayName, "127.0.0.1:8443")
        XCTAssertEqual(withPort.hostHeader, "127.0.0.1:8443")

        let v6 = try Endpoint("https://[::1]:9000?x=1")
        XCTAssertEqual(v6.host, "::1")
        XCTAssertEqual(v6.target, "/?x=1")
        XCTAssertEqual(v6.displayName, "[::1]:9000")
        XCTAssertTrue(v6.isLoopback)

        let defaultPort = try Endpoint("https://idp.example:443/token")
        XCTAssertEqual(defaultPort.hostHeader, "idp.example")
        XCTAssertEqual(defaultPort.displayName, "idp.example:443")
    }

    func testAnythingElseIsRefusedWithoutQuotingTheURL() {
        let bad = ["ftp://example.com/", "example.com/path", "https://", "https://user:pw@example.com/",
                   "https://example.com:0/", "https://example.com:65536/", "https://example.com:x/",
                   "https://[::1/", "https://[not-v6]/", "https://exa mple.com/", "https://example.com/a b",
                   "https://ex%61mple.com/", "https://[fe80::1%25eth0]/", "https://bücher.example/"]
        for url in bad {
            XCTAssertThrowsError(try Endpoint(url), url) { error in
                guard case HTTPClientError.invalidURL(let reason) = error else { return XCTFail("\(url): \(error)") }
                XCTAssertFalse(reason.contains("example"), reason)
            }
        }
    }

    func testLoopback() {
        for host in ["localhost", "LOCALHOST.", "127.0.0.1", "127.255.0.9", "::1", "[::1]", "0:0:0:0:0:0:0:1"] {
            XCTAssertTrue(Endpoint.isLoopback(host), host)
        }
        for host in ["128.0.0.1", "::2", "localhost.example", "127.0.0.1.example", "10.0.0.1", "api.localhost", "::ffff:127.0.0.1"] {
            XCTAssertFalse(Endpoint.isLoopback(host), host)
        }
    }
}

final class PercentDecodingTests: XCTestCase {
    func testEscapesAndWhatIsNotOne() {
        XCTAssertEqual(PercentDecoding.decode("a%20b%2Fc%C3%A9", plusIsSpace: false), "a b/cé")
        XCTAssertEqual(PercentDecoding.decode("a+b%2B", plusIsSpace: true), "a b+")
        XCTAssertEqual(PercentDecoding.decode("a+b", plusIsSpace: false), "a+b")
        // Two hex digits or nothing: no sign, no single digit, no other letters.
        XCTAssertEqual(PercentDecoding.decode("%+1%-1%4%zz%", plusIsSpace: false), "%+1%-1%4%zz%")
    }
}
