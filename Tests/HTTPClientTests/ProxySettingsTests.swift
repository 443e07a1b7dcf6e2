@testable import HTTPClient
import XCTest

final class ProxySettingsTests: XCTestCase {
    private func proxy(_ environment: [String: String], _ url: String) throws -> String? {
        try ProxySettings(environment: environment).proxy(for: Endpoint(url))?.description
    }

    func testSchemesPickTheirVariables() throws {
        let environment = ["https_proxy": "http://tls-proxy:3128", "http_proxy": "plain-proxy:8080"]
        XCTAssertEqual(try proxy(environment, "https://idp.example/token"), "tls-proxy:3128")
        XCTAssertEqual(try proxy(environment, "http://idp.example/token"), "plain-proxy:8080")
        XCTAssertNil(try proxy(["http_proxy": "http://p:1"], "https://idp.example/"))
        XCTAssertEqual(try proxy(["HTTPS_PROXY": "http://upper:1"], "https://idp.example/"), "upper:1")
        XCTAssertEqual(try proxy(["HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:2"], "https://idp.example/"), "lower:2")
        XCTAssertEqual(try proxy(["https_proxy": "http://noport"], "https://idp.example/"), "noport:1080")
        XCTAssertNil(try proxy([:], "https://idp.example/"))
    }

    func testLoopbackIsNeverProxied() throws {
        let environment = ["https_proxy": "http://proxy:3128", "http_proxy": "http://proxy:3128"]
        for url in ["https://127.0.0.1:9000/", "http://localhost/", "https://[::1]/", "http://127.8.9.10/"] {
            XCTAssertNil(try proxy(environment, url), url)
        }
    }

    func testNoProxyRules() throws {
        let environment = ["https_proxy": "http://proxy:3128",
                           "no_proxy": " corp.example, .internal.example ,exact.example:8443, [2001:db8::1], 10.1.2.3"]
        XCTAssertNil(try proxy(environment, "https://corp.example/"))
        XCTAssertNil(try proxy(environment, "https://idp.corp.example/"))
        XCTAssertNil(try proxy(environment, "https://internal.example/"))
        XCTAssertNil(try proxy(environment, "https://a.b.internal.example/"))
        XCTAssertNil(try proxy(environment, "https://exact.example/"), "ports in no_proxy are ignored")
        XCTAssertNil(try proxy(environment, "https://[2001:db8::1]/"))
        XCTAssertNil(try proxy(environment, "https://10.1.2.3:8443/"))
        XCTAssertEqual(try proxy(environment, "https://notcorp.example/"), "proxy:3128")
        XCTAssertEqual(try proxy(environment, "https://sub.exact.example.org/"), "proxy:3128")
        XCTAssertNil(try proxy(["https_proxy": "http://proxy:3128", "NO_PROXY": "*"], "https://anything.example/"))
    }

    /// curl (7.86 and later) and Go read address ranges in no_proxy: a provider on the
    /// internal network that the list names by its range is reached directly, not handed
    /// to the proxy (which may refuse internal destinations).
    func testNoProxyAddressRanges() throws {
        let environment = ["https_proxy": "http://proxy:3128", "no_proxy": "idp.example, 10.0.0.0/8,192.168.4.0/23, fd00:ab::/32"]
        for url in ["https://10.1.2.3/", "https://10.255.255.255:8443/", "https://192.168.5.200/", "https://[fd00:ab:1::7]/"] {
            XCTAssertNil(try proxy(environment, url), url)
        }
        for url in ["https://11.0.0.1/", "https://192.168.6.1/", "https://[fd00:ac::1]/", "https://10.example/"] {
            XCTAssertEqual(try proxy(environment, url), "proxy:3128", url)
        }
        XCTAssertNil(try proxy(["https_proxy": "http://proxy:3128", "no_proxy": "0.0.0.0/0"], "https://203.0.113.9/"))
        for broken in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x", "/8", "fd00::/129"] {
            XCTAssertEqual(try proxy(["https_proxy": "http://proxy:3128", "no_proxy": broken], "https://10.0.0.1/"), "proxy:3128", broken)
        }
    }

    func testUnusableSettingsAreReportedNotIgnored() throws {
        for setting in ["https://proxy:3128", "socks5://proxy:1080", "http://pro xy:1"] {
            let settings = ProxySettings(environment: ["https_proxy": setting])
            XCTAssertEqual(settings.choice(for: try Endpoint("https://idp.example/")), .unusable(variable: "https_proxy"), setting)
        }
    }

    func testCredentialsBecomeBasicAuthorizationAndAreNeverDescribed() throws {
        let server = try XCTUnwrap(ProxyServer("http://al%40ice:s3cret@proxy.example:3128"))
        XCTAssertEqual(server.authorization, "Basic " + Base64.encode(Array("al@ice:s3cret".utf8)))
        XCTAssertEqual(server.description, "proxy.example:3128")
        XCTAssertEqual(Base64.encode(Array("user:pass".utf8)), "dXNlcjpwYXNz")
        XCTAssertEqual(Base64.encode(Array("ab".utf8)), "YWI=")
    }
}
