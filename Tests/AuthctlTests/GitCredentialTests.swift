@testable import authctl
import XCTest

/// Which requests `authctl git-credential` answers, and for which resource.
final class GitCredentialTests: XCTestCase {
    private func request(_ proto: String, _ host: String) -> GitCredentialRequest {
        GitCredentialRequest(lines: ["protocol=\(proto)", "host=\(host)"])
    }

    func testTheDefaultPortIsTheSameHost() {
        // --resource with the default port, git sending the host without it, and the reverse.
        XCTAssertEqual(request("https", "git.example.com").resource(configured: "https://git.example.com:443"),
                       "https://git.example.com:443")
        XCTAssertEqual(request("https", "git.example.com:443").resource(configured: "https://git.example.com"),
                       "https://git.example.com")
        XCTAssertEqual(request("http", "localhost").resource(configured: "http://localhost:80/"), "http://localhost:80/")
        XCTAssertEqual(request("https", "git.example.com:443").resource(configured: nil), "https://git.example.com")
        XCTAssertEqual(request("https", "[::1]:443").resource(configured: nil), "https://[::1]")
    }

    func testAnotherPortOrHostIsNotAnswered() {
        XCTAssertNil(request("https", "git.example.com:8443").resource(configured: "https://git.example.com"))
        XCTAssertNil(request("https", "git.example.com").resource(configured: "https://git.example.com:8443"))
        XCTAssertNil(request("https", "git.example.com:80").resource(configured: "https://git.example.com"))
        XCTAssertNil(request("https", "evil.example").resource(configured: "https://git.example.com:443"))
        XCTAssertEqual(request("https", "git.example.com:8443").resource(configured: nil), "https://git.example.com:8443")
        XCTAssertEqual(request("https", "Git.Example.com").resource(configured: "https://git.example.com:443/x"),
                       "https://git.example.com:443/x")
    }
}
