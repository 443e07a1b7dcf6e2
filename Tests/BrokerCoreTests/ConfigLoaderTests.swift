@testable import BrokerCore
import XCTest

final class ConfigLoaderTests: XCTestCase {
    func testFullConfig() throws {
        let config = try ConfigLoader.parse("""
            [daemon]
            store = "memory"
            refresh_margin = 90

            [providers.corp]
            issuer = "https://login.example.com"
            client_id = "authbroker"
            scopes = ["openid", "offline_access"]
            resources = ["https://api.example.com", "https://git.example.com"]
            audience_parameter = "audience"
            """, file: "c.toml")
        XCTAssertEqual(config.daemon.store, .memory)
        XCTAssertEqual(config.daemon.refreshMargin, 90)
        XCTAssertEqual(config.providers.count, 1)
        let p = try XCTUnwrap(config.provider(named: "corp"))
        XCTAssertEqual(p.resources, ["https://api.example.com", "https://git.example.com"])
        XCTAssertEqual(p.audienceParameter, "audience")
        XCTAssertNil(p.clientSecret)
    }

    func testKernelKeyringStoreIsChosenByName() throws {
        let config = try ConfigLoader.parse("""
            [daemon]
            store = "kernel-keyring"
            [providers.a]
            issuer = "https://a.example"
            client_id = "x"
            """, file: "c.toml")
        XCTAssertEqual(config.daemon.store, .kernelKeyring)
    }

    func testDefaults() throws {
        let config = try ConfigLoader.parse("""
            [providers.a]
            issuer = "https://a.example"
            client_id = "x"
            """, file: "c.toml")
        XCTAssertEqual(config.daemon.store, .secretService)
        XCTAssertEqual(config.daemon.refreshMargin, 60)
        XCTAssertEqual(config.providers[0].scopes, ProviderConfig.defaultScopes)
        XCTAssertEqual(config.providers[0].audienceParameter, "resource")
        // Safe until told otherwise: a refresh may revoke earlier access tokens.
        XCTAssertEqual(config.providers[0].accessTokens, .onePerRefreshToken)
        XCTAssertEqual(config.providers[0].refreshTokens, .shared)
    }

    func testTokenRules() throws {
        let config = try ConfigLoader.parse("""
            [providers.a]
            issuer = "https://a.example"
            client_id = "x"
            access_tokens = "independent"
            refresh_tokens = "one-per-resource"
            """, file: "c.toml")
        XCTAssertEqual(config.providers[0].accessTokens, .independent)
        XCTAssertEqual(config.providers[0].refreshTokens, .onePerResource)
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\naccess_tokens=\"once\"", key: "providers.a.access_tokens", contains: "must be \"one-per-refresh-token\" or \"independent\"")
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nrefresh_tokens=true", key: "providers.a.refresh_tokens", contains: "must be a string")
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nrefresh_tokens=\"one-per-resource\"\ndpop=true", key: "providers.a.refresh_tokens", contains: "cannot be combined with dpop")
    }

    /// `token.get` serves the default audience and the configured resources only, unless
    /// `any_resource`; the cap on requests in flight is a [daemon] key.
    func testResourcesServedAndRequestsInFlight() throws {
        let config = try ConfigLoader.parse("""
            [daemon]
            max_requests_in_flight = 200
            [providers.a]
            issuer = "https://a.example"
            client_id = "x"
            resources = ["https://api.example.com"]
            [providers.b]
            issuer = "https://b.example"
            client_id = "x"
            any_resource = true
            """, file: "c.toml")
        XCTAssertEqual(config.daemon.maxRequestsInFlight, 200)
        let a = try XCTUnwrap(config.provider(named: "a"))
        XCTAssertTrue(a.serves(resource: nil))
        XCTAssertTrue(a.serves(resource: "https://api.example.com"))
        XCTAssertFalse(a.serves(resource: "https://other.example.com"))
        XCTAssertTrue(try XCTUnwrap(config.provider(named: "b")).serves(resource: "https://other.example.com"))
        XCTAssertEqual(DaemonSettings().maxRequestsInFlight, 1024)
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nany_resource=1", key: "providers.a.any_resource", contains: "true or false")
        assertError("[daemon]\nmax_requests_in_flight = 0\n[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"", key: "daemon.max_requests_in_flight", contains: "between 1 and 65536")
    }

    func assertError(_ toml: String, key: String?, contains text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try ConfigLoader.parse(toml, file: "/x/config.toml"), file: file, line: line) { error in
            guard let e = error as? ConfigError else { return XCTFail("not a ConfigError: \(error)", file: file, line: line) }
            XCTAssertEqual(e.key, key, file: file, line: line)
            XCTAssertTrue(e.description.contains(text), "\(e.description)", file: file, line: line)
            XCTAssertTrue(e.description.hasPrefix("/x/config.toml"), file: file, line: line)
        }
    }

    /// `[providers.""]` is a table TOML allows, but no name `--provider` could choose.
    func testAnEmptyProviderNameIsRefused() {
        assertError("[providers.\"\"]\nissuer=\"https://a\"\nclient_id=\"x\"", key: "providers.\"\"",
                    contains: "a provider needs a name: write [providers.NAME]")
    }

    func testErrorsNameFileKeyAndProblem() {
        assertError("[daemon]\nstore = \"disk\"\n[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"", key: "daemon.store", contains: "must be \"secret-service\", \"kernel-keyring\" or \"memory\"")
        assertError("[daemon]\nrefresh_margin = \"soon\"\n[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"", key: "daemon.refresh_margin", contains: "whole number")
        assertError("[providers.a]\nclient_id=\"x\"", key: "providers.a.issuer", contains: "is missing")
        assertError("[providers.a]\nissuer=\"https://a\"", key: "providers.a.client_id", contains: "is missing")
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nscope=[\"openid\"]", key: "providers.a.scope", contains: "unknown key")
        assertError("[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nresources=[1]", key: "providers.a.resources", contains: "array of strings")
        // No provider is a valid file while resources may name theirs (discovery), not without.
        XCTAssertNoThrow(try ConfigLoader.parse("[daemon]\n", file: "/x/config.toml"))
        assertError("[discovery]\nmode = \"off\"\n", key: "providers", contains: "no provider")
        assertError("[discovery]\nmode = \"maybe\"\n", key: "discovery.mode", contains: "must be \"ask\", \"allow\" or \"off\"")
        assertError("[discovery]\ntrusted_issuers = [\"http://login.example.com\"]\n", key: "discovery.trusted_issuers", contains: "must use https")
        assertError("[discovery]\nclient_id_metadata_document = \"http://127.0.0.1/client.json\"\n", key: "discovery.client_id_metadata_document", contains: "https")
        // The issuer follows discovery's rule when the file is read, not at the first sign-in.
        assertError("[providers.a]\nissuer=\"http://login.example.com\"\nclient_id=\"x\"", key: "providers.a.issuer", contains: "must use https")
        assertError("[providers.a]\nissuer=\"https://login.example.com?tenant=a\"\nclient_id=\"x\"", key: "providers.a.issuer", contains: "query")
        XCTAssertNoThrow(try ConfigLoader.parse("[providers.a]\nissuer=\"http://127.0.0.1:8080/oidc\"\nclient_id=\"x\"", file: "/x/config.toml"))
        assertError("[daemon\n", key: nil, contains: "line 1")
    }

    /// An unknown key names the nearest known one when it is at most two edits away
    /// (issue 37, item 8), and only then.
    func testAnUnknownKeySuggestsTheNearestKnownOne() {
        let provider = "[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\n"
        assertError("[daemon]\nrefresh_margn = 30\n" + provider, key: "daemon.refresh_margn",
                    contains: "daemon.refresh_margn: unknown key: did you mean refresh_margin? (known here: ")
        assertError(provider + "scope=[\"openid\"]", key: "providers.a.scope", contains: "unknown key: did you mean scopes?")
        assertError("[providers.a]\nissuer=\"https://a\"\nclient-id=\"x\"", key: "providers.a.client-id",
                    contains: "did you mean client_id?")
        assertError("[daemon]\nnot_a_key = 1\n" + provider, key: "daemon.not_a_key", contains: "unknown key (known here: ")
        XCTAssertEqual(TableReader.nearest(to: "stor", in: ["store", "store_timeout"]), "store")
        XCTAssertEqual(TableReader.nearest(to: "http_timout", in: ["http_timeout", "refresh_timeout"]), "http_timeout")
        XCTAssertNil(TableReader.nearest(to: "timeout", in: ["http_timeout", "refresh_timeout"]), "five edits away")
        XCTAssertNil(TableReader.nearest(to: "", in: ["exe"]))
    }

    func testSyntaxErrorsNameFileLineAndColumnButNeverTheValue() throws {
        let unclosed = "[providers.a]\nissuer=\"https://a\"\nclient_id=\"x\"\nclient_secret = \"hunter2"
        assertError(unclosed, key: nil, contains: "/x/config.toml: line 4, column 17: a string is not closed")
        XCTAssertThrowsError(try ConfigLoader.parse(unclosed, file: "/x/config.toml")) { error in
            XCTAssertFalse("\(error)".contains("hunter2"), "\(error)")
        }
        // Bytes that are not UTF-8 are refused where they are, not replaced.
        let path = NSTemporaryDirectory() + "config-\(getpid()).toml"
        let bytes = Array("[providers.a]\nissuer=\"https://a\"\nclient_id=\"".utf8) + [0xFF] + Array("\"".utf8)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertThrowsError(try ConfigLoader.load(path: path)) { error in
            XCTAssertEqual("\(error)", "\(path): line 3, column 12: the text is not valid UTF-8 here: save the file as UTF-8")
        }
    }

    func testAClientCredentialsProviderMayTakeItsSecretFromTheSecretService() throws {
        // `authctl set-secret` stores it later (docs/configuration.md, `grant`).
        let config = try ConfigLoader.parse("[providers.ci]\nissuer=\"https://a.example\"\nclient_id=\"bot\"\ngrant=\"client_credentials\"", file: "/x/config.toml")
        XCTAssertEqual(config.providers.first?.grant, .clientCredentials)
        XCTAssertNil(config.providers.first?.clientSecret)
    }

    func testAFolderOrAHugeFileIsNamedAsSuch() throws {
        let folder = NSTemporaryDirectory() + "config-dir-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        XCTAssertThrowsError(try ConfigLoader.load(path: folder)) { error in
            XCTAssertTrue("\(error)".contains("is a folder"), "\(error)")
        }
        let huge = NSTemporaryDirectory() + "config-huge-\(getpid()).toml"
        XCTAssertTrue(FileManager.default.createFile(atPath: huge, contents: Data(repeating: UInt8(ascii: "#"), count: 2 << 20)))
        defer { try? FileManager.default.removeItem(atPath: huge) }
        XCTAssertThrowsError(try ConfigLoader.load(path: huge)) { error in
            XCTAssertTrue("\(error)".contains("larger than 1 MiB"), "\(error)")
        }
    }

    func testSignInNotificationsCanBeTurnedOff() throws {
        let provider = "[providers.a]\nissuer = \"https://a.example\"\nclient_id = \"c\"\n"
        XCTAssertTrue(try ConfigLoader.parse(provider, file: "c.toml").daemon.signInNotifications)
        let off = try ConfigLoader.parse("[daemon]\nsign_in_notifications = false\n" + provider, file: "c.toml")
        XCTAssertFalse(off.daemon.signInNotifications)
        XCTAssertThrowsError(try ConfigLoader.parse("[daemon]\nsign_in_notifications = \"no\"\n" + provider, file: "c.toml")) {
            XCTAssertTrue("\($0)".contains("daemon.sign_in_notifications"))
        }
    }
}
