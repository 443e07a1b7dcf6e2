import HTTPClient
@testable import OAuth
import XCTest

/// The policy check and the connection read a URL with one parser and one loopback rule:
/// a URL the check lets through is one the client connects to as checked.
final class EndpointPolicyTests: XCTestCase {
    private func allowed(_ url: String) -> Bool {
        do {
            try EndpointPolicy.check(url, what: "issuer")
            return true
        } catch {
            return false
        }
    }

    func testTheCheckAgreesWithTheConnection() {
        let urls = [
            "https://login.example.com", "https://login.example.com:8443/realms/x", "http://127.0.0.1:5556/api/oidc",
            "http://localhost/", "http://LOCALHOST.:80", "http://[::1]:8080/", "http://[0:0:0:0:0:0:0:1]/",
            // refused by both
            "http://login.example.com", "http://api.localhost/", "http://[::ffff:127.0.0.1]/", "http://127.0.0.1.example/",
            "http://user@127.0.0.1/", "https://user:pw@login.example.com/", "ftp://login.example.com",
            "https://login.example.com:0/", "https://login.example.com:65536/", "https://exa mple.com/", "login.example.com",
            "https://[fe80::1%25eth0]/",
        ]
        for url in urls {
            let connection = (try? Endpoint(url)).map { $0.scheme == .https || $0.isLoopback } ?? false
            XCTAssertEqual(allowed(url), connection, url)
        }
        XCTAssertTrue(allowed("http://127.0.0.1:5556/api/oidc"))
        XCTAssertFalse(allowed("http://api.localhost/"), "a name under .localhost may resolve anywhere: no plain http to it")
        XCTAssertFalse(allowed("http://user@127.0.0.1/"), "the connection refuses user information, so the check does too")
    }

    func testTheSentenceNamesTheURLWithoutItsSecrets() {
        do {
            try EndpointPolicy.check("https://user:pw@login.example.com/x?code=abc", what: "issuer")
            XCTFail("user information was let through")
        } catch {
            XCTAssertTrue(error.message.contains("issuer https://login.example.com/x"), error.message)
            XCTAssertFalse(error.message.contains("pw"), error.message)
            XCTAssertFalse(error.message.contains("abc"), error.message)
        }
    }
}
