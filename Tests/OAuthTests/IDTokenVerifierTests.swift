import BrokerCrypto
import BrokerProtocol
import Foundation
import JWSTestSupport
import OAuth
import Synchronization
import XCTest

/// The ID-token verifier against a JWKS served by the STUB provider, with tokens signed at
/// test time by the openssl command-line tool. Forged tokens are exactly what a real
/// provider will not produce, hence the stub.
final class IDTokenVerifierTests: XCTestCase {
    private struct Keys {
        var rsa: TestKey
        var otherRSA: TestKey
        var p256: TestKey
        var p384: TestKey
        var ed25519: TestKey
        var rotated: TestKey
        var spareRSA: TestKey
    }

    nonisolated(unsafe) private static var made: Keys?
    nonisolated(unsafe) private static var directory: URL?

    override class func setUp() {
        super.setUp()
        guard let directory = try? OpenSSLTool.temporaryDirectory() else { return }
        Self.directory = directory
        made = try? Keys(rsa: .generate(.rsa(bits: 2048), in: directory), otherRSA: .generate(.rsa(bits: 2048), in: directory),
                         p256: .generate(.p256, in: directory), p384: .generate(.p384, in: directory),
                         ed25519: .generate(.ed25519, in: directory), rotated: .generate(.p256, in: directory),
                         spareRSA: .generate(.rsa(bits: 2048), in: directory))
    }

    override class func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
        super.tearDown()
    }

    private var stub: StubProvider!
    private let clientID = "broker-test"

    override func setUp() async throws {
        stub = try StubProvider()
    }

    override func tearDown() async throws {
        stub.stop()
    }

    private func keys() throws -> Keys {
        guard let made = Self.made else { throw XCTSkip("openssl could not generate test keys") }
        return made
    }

    /// The provider's published keys: RSA (no alg: RS256 and PS256), P-256 for ES256,
    /// P-384 with no alg, Ed25519, a second RSA key for RS256 only, and an RSA key for
    /// encryption only. `otherRSA` signs but is published only for encryption.
    private func publishedKeys(_ keys: Keys) -> [JWK] {
        [keys.rsa.jwk(kid: "rsa-1"), keys.p256.jwk(kid: "ec-1", alg: "ES256"), keys.p384.jwk(kid: "ec-384"),
         keys.ed25519.jwk(kid: "ed-1"), keys.spareRSA.jwk(kid: "rsa-2", alg: "RS256"),
         keys.otherRSA.jwk(kid: "enc-1", use: "enc")]
    }

    private func jwksAnswer(_ jwks: [JWK]) throws -> StubAnswer {
        struct Set: Encodable { var keys: [JWK] }
        return StubAnswer.json(String(decoding: try JSONEncoder().encode(Set(keys: jwks)), as: UTF8.self))
    }

    private var metadata: ProviderMetadata {
        ProviderMetadata(issuer: stub.baseURL, tokenEndpoint: stub.baseURL + "/token", jwksURI: stub.baseURL + "/jwks")
    }

    private var jwksRequests: Int { stub.requests.filter { $0.path == "/jwks" }.count }

    /// Claims of a good token for `clientID`, as JSON text, with `changes` merged in
    /// (a JSON null removes the claim).
    private func claims(_ changes: [String: JSONValue] = [:]) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        var claims: [String: JSONValue] = [
            "iss": .string(stub.baseURL), "sub": .string("alice"), "aud": .string(clientID),
            "exp": .number(now + 300), "iat": .number(now), "nonce": .string("n-1"), "name": .string("Alice Example"),
        ]
        for (name, value) in changes { claims[name] = value == .null ? nil : value }
        return String(decoding: try JSONEncoder().encode(claims), as: UTF8.self)
    }

    private func token(_ key: TestKey, _ algorithm: JWSAlgorithm, kid: String?, claims: String? = nil,
                       header: String? = nil) throws -> String {
        let kidMember = kid.map { #","kid":"\#($0)""# } ?? ""
        return try TestJWS.compact(header: header ?? #"{"alg":"\#(algorithm.rawValue)","typ":"JWT"\#(kidMember)}"#,
                                   payload: try claims ?? self.claims()) { try key.sign($0, algorithm) }
    }

    private func verifier(interval: TimeInterval = 60, clock: TestClock = TestClock()) -> IDTokenVerifier {
        IDTokenVerifier(keys: JWKSCache(transport: NetworkTransport(timeout: 5), minimumRefetchInterval: interval,
                                        clock: { clock.now }))
    }

    private func refusal(_ verifier: IDTokenVerifier, _ token: String, nonce: String? = "n-1",
                         line: UInt = #line) async -> IDTokenError? {
        do {
            _ = try await verifier.verify(token, metadata: metadata, clientID: clientID, nonce: nonce)
            XCTFail("the token was accepted", line: line)
            return nil
        } catch {
            return error
        }
    }

    func testValidTokensOfEveryAlgorithmAreAccepted() async throws {
        let keys = try keys()
        stub.route("/jwks", try jwksAnswer(publishedKeys(keys)))
        let verifier = verifier()
        for (key, algorithm, kid) in [(keys.rsa, JWSAlgorithm.rs256, "rsa-1"), (keys.rsa, .ps256, "rsa-1"),
                                      (keys.p256, .es256, "ec-1"), (keys.p384, .es384, "ec-384"), (keys.ed25519, .edDSA, "ed-1")] {
            let claims = try await verifier.verify(try token(key, algorithm, kid: kid), metadata: metadata,
                                                   clientID: clientID, nonce: "n-1")
            XCTAssertEqual(claims.sub, "alice", "\(algorithm)")
            XCTAssertEqual(claims.name, "Alice Example")
            XCTAssertEqual(claims.aud, [clientID])
        }
        // Without a kid, the only key that fits is used: ES384 has one, Ed25519 has one.
        _ = try await verifier.verify(try token(keys.p384, .es384, kid: nil), metadata: metadata, clientID: clientID, nonce: "n-1")
        _ = try await verifier.verify(try token(keys.ed25519, .edDSA, kid: nil), metadata: metadata, clientID: clientID, nonce: nil)
        // Several audiences with azp = the client, and no nonce expected (device flow).
        let several = try claims(["aud": .array([.string(clientID), .string("api")]), "azp": .string(clientID), "nonce": .null])
        _ = try await verifier.verify(try token(keys.rsa, .rs256, kid: "rsa-1", claims: several), metadata: metadata,
                                      clientID: clientID, nonce: nil)
        XCTAssertEqual(jwksRequests, 1, "the key set is fetched once and cached")
    }

    func testForgedTokensAreRefusedEachForItsReason() async throws {
        let keys = try keys()
        stub.route("/jwks", try jwksAnswer(publishedKeys(keys)))
        let verifier = verifier()
        let good = try claims()
        let unsigned = Base64URL.encode(Array(#"{"alg":"none","kid":"rsa-1"}"#.utf8)) + "." + Base64URL.encode(Array(good.utf8)) + "."
        // The classic confusion: HS256 keyed with the bytes of the RSA public key.
        let confused = try TestJWS.compact(header: #"{"alg":"HS256","kid":"rsa-1"}"#, payload: good) {
            try OpenSSLTool.hmacSHA256($0, key: keys.rsa.publicKeyPEM)
        }
        let cases: [(String, String?, IDTokenError.Reason)] = [
            ("alg none", unsigned, .algorithmNotAllowed),
            ("HS256 with the public key", confused, .algorithmNotAllowed),
            ("no alg", try token(keys.rsa, .rs256, kid: "rsa-1", header: #"{"kid":"rsa-1"}"#), .algorithmNotAllowed),
            ("RS512", try token(keys.rsa, .rs256, kid: "rsa-1", header: #"{"alg":"RS512","kid":"rsa-1"}"#), .algorithmNotAllowed),
            ("wrong key", try token(keys.otherRSA, .rs256, kid: "rsa-1"), .badSignature),
            ("PS256 signature called RS256", try token(keys.rsa, .ps256, kid: "rsa-1", header: #"{"alg":"RS256","kid":"rsa-1"}"#), .badSignature),
            ("ES256 header with the RSA key", try token(keys.p256, .es256, kid: "rsa-1"), .keyDoesNotFitAlgorithm),
            ("ES384 header with the P-256 key", try token(keys.p384, .es384, kid: "ec-1"), .keyDoesNotFitAlgorithm),
            ("PS256 with a key whose alg is ES256", try token(keys.rsa, .ps256, kid: "ec-1"), .keyDoesNotFitAlgorithm),
            ("key for encryption", try token(keys.otherRSA, .rs256, kid: "enc-1"), .keyDoesNotFitAlgorithm),
            ("no kid, two RSA keys could fit", try token(keys.rsa, .rs256, kid: nil), .noSuitableKey),
            ("wrong issuer", try token(keys.rsa, .rs256, kid: "rsa-1", claims: try claims(["iss": .string(stub.baseURL + "/")])), .wrongIssuer),
            ("wrong aud", try token(keys.rsa, .rs256, kid: "rsa-1", claims: try claims(["aud": .string("someone-else")])), .wrongAudience),
            ("several aud without azp", try token(keys.rsa, .rs256, kid: "rsa-1",
                                                  claims: try claims(["aud": .array([.string(clientID), .string("other")])])), .missingAuthorizedParty),
            ("azp of another client", try token(keys.rsa, .rs256, kid: "rsa-1", claims: try claims(["azp": .string("other")])), .wrongAuthorizedParty),
            ("expired", try token(keys.p256, .es256, kid: "ec-1",
                                  claims: try claims(["exp": .number(Date().timeIntervalSince1970 - 120)])), .expired),
            ("no exp", try token(keys.p256, .es256, kid: "ec-1", claims: try claims(["exp": .null])), .expired),
            ("iat in the future", try token(keys.p256, .es256, kid: "ec-1",
                                            claims: try claims(["iat": .number(Date().timeIntervalSince1970 + 600)])), .issuedInFuture),
            ("no iat", try token(keys.p256, .es256, kid: "ec-1", claims: try claims(["iat": .null])), .issuedInFuture),
            ("wrong nonce", try token(keys.ed25519, .edDSA, kid: "ed-1", claims: try claims(["nonce": .string("n-2")])), .wrongNonce),
            ("missing nonce", try token(keys.ed25519, .edDSA, kid: "ed-1", claims: try claims(["nonce": .null])), .missingNonce),
            ("no sub", try token(keys.ed25519, .edDSA, kid: "ed-1", claims: try claims(["sub": .null])), .invalidClaims),
            // Order: a bad signature is found before the claims are read.
            ("expired and forged", try token(keys.otherRSA, .rs256, kid: "rsa-1",
                                             claims: try claims(["exp": .number(1000), "aud": .string("x")])), .badSignature),
            ("two parts", "abc.def", .malformed),
            ("JWE", "a.b.c.d.e", .malformed),
            ("bad base64url", "eyJhbGciOiJSUzI1NiJ9.%%%.abc", .malformed),
            ("header not JSON", Base64URL.encode(Array("hello".utf8)) + ".e30.", .malformed),
            ("crit", try token(keys.rsa, .rs256, kid: "rsa-1", header: #"{"alg":"RS256","kid":"rsa-1","crit":["exp"]}"#), .malformed),
            ("huge", String(repeating: "A", count: 70_000) + ".e30.", .malformed),
        ]
        for (what, token, reason) in cases {
            guard let token else { continue }
            let error = await refusal(verifier, token)
            XCTAssertEqual(error?.reason, reason, what)
            XCTAssertFalse(error?.message.contains(token) ?? false, "\(what): the message quotes the token")
        }
        XCTAssertEqual(jwksRequests, 1, "no forged token made the verifier fetch the keys again")
    }

    func testUnknownKidFetchesAgainOnceThenNotWithinTheInterval() async throws {
        let keys = try keys()
        let clock = TestClock()
        // The provider rotates: the second answer adds a new key.
        stub.route("/jwks", try jwksAnswer(publishedKeys(keys)),
                   try jwksAnswer(publishedKeys(keys) + [keys.rotated.jwk(kid: "ec-2")]))
        let verifier = verifier(interval: 60, clock: clock)
        _ = try await verifier.verify(try token(keys.rsa, .rs256, kid: "rsa-1"), metadata: metadata, clientID: clientID, nonce: "n-1")
        XCTAssertEqual(jwksRequests, 1)

        // Within the interval of that fetch, an unknown kid fetches nothing.
        var error = await refusal(verifier, try token(keys.rotated, .es256, kid: "ec-2"))
        XCTAssertEqual(error?.reason, .unknownKeyID)
        XCTAssertEqual(jwksRequests, 1)

        // Later, the unknown kid fetches the set once more and finds the rotated key.
        clock.advance(61)
        _ = try await verifier.verify(try token(keys.rotated, .es256, kid: "ec-2"), metadata: metadata, clientID: clientID, nonce: "n-1")
        XCTAssertEqual(jwksRequests, 2)

        // A kid the provider never published: one fetch, then refused…
        clock.advance(61)
        error = await refusal(verifier, try token(keys.otherRSA, .rs256, kid: "nobody"))
        XCTAssertEqual(error?.reason, .unknownKeyID)
        XCTAssertEqual(jwksRequests, 3)
        // …and a second unknown kid within the interval sends no request at all.
        error = await refusal(verifier, try token(keys.otherRSA, .rs256, kid: "nobody-else"))
        XCTAssertEqual(error?.reason, .unknownKeyID)
        XCTAssertEqual(jwksRequests, 3)
        let count = await verifier.keys.requestCount[metadata.jwksURI ?? ""]
        XCTAssertEqual(count, 3)
    }

    func testWithoutKidARotatedKeyIsFetchedOnceThenNotWithinTheInterval() async throws {
        let keys = try keys()
        let clock = TestClock()
        // A provider with one key and no kid in its tokens rotates that key.
        stub.route("/jwks", try jwksAnswer([keys.p256.jwk(kid: "ec-1", alg: "ES256")]),
                   try jwksAnswer([keys.rotated.jwk(kid: "ec-2", alg: "ES256")]))
        let verifier = verifier(interval: 60, clock: clock)
        _ = try await verifier.verify(try token(keys.p256, .es256, kid: nil), metadata: metadata, clientID: clientID, nonce: "n-1")
        XCTAssertEqual(jwksRequests, 1)

        // The next sign-in's token is signed with the new key: the set is fetched again.
        clock.advance(61)
        _ = try await verifier.verify(try token(keys.rotated, .es256, kid: nil), metadata: metadata, clientID: clientID, nonce: "n-1")
        XCTAssertEqual(jwksRequests, 2)

        // A forged token without kid, within the interval, fetches nothing.
        let error = await refusal(verifier, try token(keys.p256, .es256, kid: nil))
        XCTAssertEqual(error?.reason, .badSignature)
        XCTAssertEqual(jwksRequests, 2)
    }

    func testConcurrentUnknownKidsShareOneFetch() async throws {
        let keys = try keys()
        stub.route("/jwks", try jwksAnswer(publishedKeys(keys)))
        let verifier = verifier(interval: 60)
        let token = try token(keys.otherRSA, .rs256, kid: "nobody")
        let metadata = metadata
        let clientID = clientID
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { _ = try? await verifier.verify(token, metadata: metadata, clientID: clientID, nonce: nil) }
            }
        }
        // Eight callers share the first fetch, and the unknown kid fetches nothing more
        // within the interval.
        XCTAssertEqual(jwksRequests, 1)
    }

    func testUnreachableOrBrokenKeySetIsReported() async throws {
        let keys = try keys()
        let token = try token(keys.rsa, .rs256, kid: "rsa-1")
        stub.route("/jwks", .empty(status: 500), .json(#"{"keys":"nope"}"#), .json(#"{"keys":[{"kty":"RSA","kid":"rsa-1","n":"AQAB","e":"AQAB"}, 7]}"#))
        let verifier = verifier(interval: 0)
        var error = await refusal(verifier, token)
        XCTAssertEqual(error?.reason, .keysUnavailable)
        if case .invalidResponse? = error?.underlying {} else { XCTFail("\(String(describing: error))") }
        XCTAssertEqual(error?.oauthError, error?.underlying)
        error = await refusal(verifier, token)
        XCTAssertEqual(error?.reason, .keysUnavailable)
        // A key the provider publishes broken is named as such.
        error = await refusal(verifier, token)
        XCTAssertEqual(error?.reason, .keyDoesNotFitAlgorithm)
        XCTAssertTrue(error?.message.contains("bit modulus") ?? false, error?.message ?? "")

        let noKeys = IDTokenVerifier(keys: JWKSCache(transport: NoNetworkTransport()))
        do {
            _ = try await noKeys.verify(token, metadata: metadata, clientID: clientID, nonce: nil)
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.reason, .keysUnavailable)
            XCTAssertEqual(error.underlying, .unreachable("no network in this test"))
        }
        let noJWKS = ProviderMetadata(issuer: stub.baseURL, tokenEndpoint: stub.baseURL + "/token")
        do {
            _ = try await noKeys.verify(token, metadata: noJWKS, clientID: clientID, nonce: nil)
            XCTFail("accepted")
        } catch {
            XCTAssertEqual(error.reason, .keysUnavailable)
        }
    }
}

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let seconds = Mutex(1000.0)
    var now: Double { seconds.withLock { $0 } }
    func advance(_ by: Double) { seconds.withLock { $0 += by } }
}
