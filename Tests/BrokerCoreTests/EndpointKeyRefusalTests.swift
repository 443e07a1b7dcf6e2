@testable import BrokerCore
import Testing

/// An endpoint key in config.toml is checked like the issuer: a URL that is not https (but
/// for a loopback host) or not absolute is refused, naming the key, before the daemon starts.
@Suite struct EndpointKeyRefusalTests {
    @Test(arguments: [
        ("device_authorization_endpoint", "http://login.example.com/device", "must use https"),
        ("device_authorization_endpoint", "/device", "not an absolute URL"),
        ("device_authorization_endpoint", "ftp://login.example.com/device", "must use https"),
        ("userinfo_endpoint", "http://idp.example.test/userinfo", "must use https"),
        ("revocation_endpoint", "http://login.example.com/revoke", "must use https"),
    ])
    func anEndpointKeyThatIsNotAnHTTPSURLIsRefusedNamingTheKey(key: String, url: String, problem: String) {
        let error = #expect(throws: ConfigError.self) {
            try ConfigLoader.parse("""
                [providers.corp]
                issuer = "https://login.example.com"
                client_id = "authbroker"
                \(key) = "\(url)"
                """, file: "c.toml")
        }
        #expect(error?.key == "providers.corp.\(key)")
        #expect(error?.problem.contains(problem) == true, "\(String(describing: error))")
    }
}
