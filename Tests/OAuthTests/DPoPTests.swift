import BrokerCrypto
import Foundation
import OAuth
import XCTest

/// DPoP proofs (RFC 9449 §4) and the token endpoint's nonce challenge (§8), against a
/// STUB provider: it records the proofs, which are checked with the key in their header.
final class DPoPTests: XCTestCase {
    private var stub: StubProvider!

    override func setUpWithError() throws { stub = try StubProvider() }
    override func tearDown() { stub.stop() }

    /// The proof's header and claims, after its signature was verified with the header's key.
    private func open(_ proof: String, file: StaticString = #filePath, line: UInt = #line) throws -> (header: [String: Any], claims: [String: Any]) {
        let parts = proof.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(parts.count, 3, file: file, line: line)
        let header = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(XCTUnwrap(Base64URL.decode(parts[0])))) as? [String: Any])
        let claims = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(XCTUnwrap(Base64URL.decode(parts[1])))) as? [String: Any])
        let jwkData = try JSONSerialization.data(withJSONObject: try XCTUnwrap(header["jwk"]))
        let jwk = try JSONDecoder().decode(JWK.self, from: jwkData)
        let algorithm = try XCTUnwrap(JWSAlgorithm(rawValue: try XCTUnwrap(header["alg"] as? String)))
        try jwk.publicKey().verify(signature: try XCTUnwrap(Base64URL.decode(parts[2])),
                                   message: Array((parts[0] + "." + parts[1]).utf8), algorithm: algorithm)
        XCTAssertEqual(header["typ"] as? String, "dpop+jwt", file: file, line: line)
        XCTAssertNil((header["jwk"] as? [String: Any])?["d"], "no private member", file: file, line: line)
        return (header, claims)
    }

    func testProofCarriesTheClaimsAndVerifiesWithItsOwnKey() throws {
        for algorithm in SigningKey.algorithms {
            let signer = try DPoPSigner(key: SigningKey.generate(algorithm))
            let proof = try signer.proof(method: "get", url: "https://api.example/v1/items?page=2#top", now: 1_700_000_000.9,
                                         nonce: "n-\"1\"", accessToken: "fake-access-token")
            let (header, claims) = try open(proof)
            XCTAssertEqual(header["alg"] as? String, algorithm.rawValue)
            XCTAssertEqual(claims["htm"] as? String, "GET")
            XCTAssertEqual(claims["htu"] as? String, "https://api.example/v1/items")
            XCTAssertEqual(claims["iat"] as? Int, 1_700_000_000)
            XCTAssertEqual(claims["nonce"] as? String, "n-\"1\"")
            XCTAssertEqual(claims["ath"] as? String, Base64URL.encode(SHA256.hash(Array("fake-access-token".utf8))))
            let jwk = try JSONDecoder().decode(JWK.self, from: JSONSerialization.data(withJSONObject: header["jwk"]!))
            XCTAssertEqual(jwk.thumbprint(), signer.thumbprint)
        }
    }

    func testEveryProofHasAFreshJTI() throws {
        let signer = try DPoPSigner(key: SigningKey.generate(.es256))
        var seen = Set<String>()
        for _ in 0..<50 {
            let claims = try open(try signer.proof(method: "POST", url: "https://as.example/token", now: 1)).claims
            XCTAssertNil(claims["ath"])
            XCTAssertNil(claims["nonce"])
            XCTAssertTrue(seen.insert(try XCTUnwrap(claims["jti"] as? String)).inserted)
        }
    }

    private func transport(_ signer: DPoPSigner, nonces: DPoPNonces) -> DPoPTransport {
        DPoPTransport(base: NetworkTransport(timeout: 5), signer: signer, endpoint: stub.baseURL + "/token",
                      nonces: nonces, now: { 1_700_000_000 })
    }

    func testNonceChallengeIsAnsweredWithOneRetryAndRemembered() async throws {
        let challenge = StubAnswer(status: 400, headers: ["Content-Type": "application/json", "DPoP-Nonce": "nonce-1"],
                                   body: Array(#"{"error":"use_dpop_nonce","error_description":"fresh nonce"}"#.utf8))
        let dpop = StubAnswer.json(#"{"access_token":"fake-access","token_type":"DPoP","expires_in":300}"#)
        stub.route("/token", challenge, dpop, dpop)
        let signer = try DPoPSigner(key: SigningKey.generate(.es256))
        let nonces = DPoPNonces()
        let client = OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL, clientID: "broker-test"),
                                 transport: transport(signer, nonces: nonces))
        let tokens = try await client.refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil)
        XCTAssertEqual(tokens.tokenType, "DPoP")
        _ = try await client.refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil)
        let proofs = try stub.requests.map { try open(try XCTUnwrap($0.headers["dpop"])).claims }
        XCTAssertEqual(proofs.count, 3)
        XCTAssertNil(proofs[0]["nonce"])
        XCTAssertEqual(proofs[1]["nonce"] as? String, "nonce-1")
        XCTAssertEqual(proofs[2]["nonce"] as? String, "nonce-1", "the nonce is remembered for the next request")
        XCTAssertNotEqual(proofs[0]["jti"] as? String, proofs[1]["jti"] as? String)
        XCTAssertEqual(proofs[0]["htu"] as? String, stub.baseURL + "/token")
        XCTAssertEqual(proofs[0]["htm"] as? String, "POST")
        XCTAssertEqual(nonces.current(for: stub.baseURL + "/token?x"), "nonce-1")
        XCTAssertNil(nonces.current(for: "https://other.example/token"))
    }

    func testASecondChallengeIsNotRetriedAgain() async throws {
        let challenge = { (nonce: String) in
            StubAnswer(status: 400, headers: ["Content-Type": "application/json", "DPoP-Nonce": nonce],
                       body: Array(#"{"error":"use_dpop_nonce"}"#.utf8))
        }
        stub.route("/token", challenge("a"), challenge("b"), challenge("c"))
        let client = OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL, clientID: "broker-test"),
                                 transport: transport(try DPoPSigner(key: SigningKey.generate(.edDSA)), nonces: DPoPNonces()))
        let error = await expectError { try await client.refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil) }
        guard case .provider(oauthCode: "use_dpop_nonce", _, _) = error else { return XCTFail("\(String(describing: error))") }
        XCTAssertEqual(stub.requests.count, 2, "exactly one retry")
    }

    func testOnlyTheTokenEndpointGetsProofs() async throws {
        stub.route("/revoke", .empty(status: 200))
        let client = OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL, clientID: "broker-test"),
                                 transport: transport(try DPoPSigner(key: SigningKey.generate(.es256)), nonces: DPoPNonces()))
        try await client.revoke(stubMetadata(stub), token: "t", tokenTypeHint: "refresh_token")
        XCTAssertNil(stub.requests.first?.headers["dpop"])
    }

    func testUserinfoWithABoundTokenCarriesAProofWithATHAndAnswersTheResourceServersNonce() async throws {
        let challenge = StubAnswer(status: 401, headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "rs-1"])
        stub.route("/userinfo", challenge, .json(#"{"sub":"s-1"}"#))
        let nonces = DPoPNonces()
        let client = OAuthClient(configuration: ClientConfiguration(issuer: stub.baseURL, clientID: "broker-test"),
                                 transport: transport(try DPoPSigner(key: SigningKey.generate(.es256)), nonces: nonces))
        var metadata = stubMetadata(stub)
        metadata.userinfoEndpoint = stub.baseURL + "/userinfo"
        let claims = try await client.userinfo(metadata, accessToken: "fake-bound", subject: "s-1", tokenType: "DPoP")
        XCTAssertEqual(claims["sub"]?.stringValue, "s-1")
        XCTAssertEqual(stub.requests.count, 2)
        XCTAssertEqual(stub.requests[1].headers["authorization"], "DPoP fake-bound")
        let proof = try open(try XCTUnwrap(stub.requests[1].headers["dpop"])).claims
        XCTAssertEqual(proof["ath"] as? String, Base64URL.encode(SHA256.hash(Array("fake-bound".utf8))))
        XCTAssertEqual(proof["nonce"] as? String, "rs-1")
        XCTAssertEqual(proof["htm"] as? String, "GET")
        // A bearer token through the same transport gets no proof.
        stub.route("/userinfo", .json(#"{"sub":"s-1"}"#))
        _ = try await client.userinfo(metadata, accessToken: "fake-bearer", subject: "s-1")
        XCTAssertNil(stub.requests[2].headers["dpop"])
        XCTAssertEqual(stub.requests[2].headers["authorization"], "Bearer fake-bearer")
    }

    func testExtraTokenParametersAreSentAndReservedNamesKnown() async throws {
        stub.route("/token", bearerAnswer)
        _ = try await stubClient(stub).refresh(stubMetadata(stub), refreshToken: "r", resource: nil, scopes: nil,
                                               extra: [("organization_id", "org 1")])
        XCTAssertEqual(stub.requests.first?.value("organization_id"), "org 1")
        XCTAssertEqual(TokenRequestParameters.reserved(in: ["audience", "organization_id", "grant_type", "state"]),
                       ["audience", "grant_type", "state"])
    }
}
