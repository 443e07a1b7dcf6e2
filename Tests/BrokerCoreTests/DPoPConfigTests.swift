@testable import BrokerCore
import BrokerCrypto
import OAuth
import SecretStore
import XCTest

/// `dpop` and `token_params` in config.toml, the DPoP key in the stored item, and the
/// check against the provider's `dpop_signing_alg_values_supported`.
final class DPoPConfigTests: XCTestCase {
    private func provider(_ lines: String) throws -> ProviderConfig {
        try ConfigLoader.parse("[providers.a]\nissuer = \"https://a.example\"\nclient_id = \"x\"\n" + lines, file: "c.toml").providers[0]
    }

    private func refusal(_ lines: String) -> String {
        do {
            _ = try provider(lines)
            return "accepted"
        } catch {
            return (error as? ConfigError)?.description ?? "\(error)"
        }
    }

    func testDPoPSetting() throws {
        XCTAssertNil(try provider("").dpop)
        XCTAssertNil(try provider("dpop = false").dpop)
        XCTAssertEqual(try provider("dpop = true").dpop, .es256)
        XCTAssertEqual(try provider("dpop = \"EdDSA\"").dpop, .edDSA)
        XCTAssertEqual(try provider("dpop = \"RS256\"").dpop, .rs256)
        for wrong in ["dpop = \"HS256\"", "dpop = \"PS256\"", "dpop = 1", "dpop = \"es256\""] {
            XCTAssertTrue(refusal(wrong).contains("providers.a.dpop: must be true, false or one of \"ES256\", \"EdDSA\", \"RS256\""), refusal(wrong))
        }
    }

    func testTokenParams() throws {
        XCTAssertEqual(try provider("token_params = { organization_id = \"o-1\", tenant = \"t\" }").tokenParams,
                       ["organization_id": "o-1", "tenant": "t"])
        XCTAssertTrue(refusal("token_params = { grant_type = \"x\", scope = \"y\" }").contains("grant_type, scope cannot be set"))
        XCTAssertTrue(refusal("token_params = { n = 1 }").contains("token_params.n: must be a string"))
    }

    func testStoredItemKeepsTheKeyAndOldItemsStillRead() throws {
        let old = StoredCredential(provider: "a", issuer: "https://a.example", clientID: "x", subject: "s", label: "l",
                                   secret: #"{"version":1,"refresh_token":"fake-rt","username":"u"}"#)
        let read = try XCTUnwrap(AccountSecret.account(from: old))
        XCTAssertEqual(read.refreshToken, "fake-rt")
        XCTAssertNil(read.dpop)

        for algorithm in SigningKey.algorithms {
            var account = read
            account.dpop = try DPoPSigner(key: SigningKey.generate(algorithm))
            let item = AccountSecret.credential(for: account)
            let back = try XCTUnwrap(AccountSecret.account(from: item))
            XCTAssertEqual(back.dpop?.thumbprint, account.dpop?.thumbprint)
            XCTAssertEqual(back.dpop?.key.algorithm, algorithm)
        }
        // A key that cannot be read is dropped, the account is kept.
        let broken = StoredCredential(provider: "a", issuer: "https://a.example", clientID: "x", subject: "s", label: "l",
                                      secret: #"{"version":1,"refresh_token":"fake-rt","dpop_key":"AAAA","dpop_alg":"ES256"}"#)
        XCTAssertNil(try XCTUnwrap(AccountSecret.account(from: broken)).dpop)
    }

    func testAlgorithmTheProviderDoesNotTakeIsRefusedWithAHint() async throws {
        var config = try provider("dpop = true")
        let p = Provider(config: config, transport: NoNetwork(), clock: .system)
        var metadata = ProviderMetadata(issuer: "https://a.example", tokenEndpoint: "https://a.example/token")
        XCTAssertThrowsError(try p.newDPoPSigner(metadata: metadata), "a provider that does not say it takes DPoP would issue Bearer tokens") {
            XCTAssertTrue(($0 as? BrokerError)?.message.contains("lists no dpop_signing_alg_values_supported") == true)
        }
        metadata.dpopSigningAlgValuesSupported = ["PS256", "EdDSA"]
        XCTAssertThrowsError(try p.newDPoPSigner(metadata: metadata)) {
            XCTAssertEqual(($0 as? BrokerError)?.message, "a does not take ES256 DPoP proofs (it takes PS256, EdDSA): set dpop = \"EdDSA\" in config.toml")
        }
        config.dpop = .edDSA
        XCTAssertEqual(try Provider(config: config, transport: NoNetwork(), clock: .system).newDPoPSigner(metadata: metadata)?.key.algorithm, .edDSA)
        config.dpop = nil
        XCTAssertNil(try Provider(config: config, transport: NoNetwork(), clock: .system).newDPoPSigner(metadata: metadata))
    }
}

private struct NoNetwork: HTTPTransport {
    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse { throw .unreachable("no network in this test") }
}
