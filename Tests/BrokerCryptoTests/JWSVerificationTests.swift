import BrokerCrypto
import Foundation
import JWSTestSupport
import XCTest

/// Signatures made by the openssl command-line tool with keys generated at test time,
/// verified by BrokerCrypto.
final class JWSVerificationTests: XCTestCase {
    /// Keys are made once for the class: RSA generation is the slow part.
    nonisolated(unsafe) private static var keys: [String: TestKey] = [:]
    nonisolated(unsafe) private static var directory: URL?

    override class func setUp() {
        super.setUp()
        do {
            let directory = try OpenSSLTool.temporaryDirectory()
            Self.directory = directory
            keys = [
                "rsa": try TestKey.generate(.rsa(bits: 2048), in: directory),
                "rsa2": try TestKey.generate(.rsa(bits: 2048), in: directory),
                "p256": try TestKey.generate(.p256, in: directory),
                "p256b": try TestKey.generate(.p256, in: directory),
                "p384": try TestKey.generate(.p384, in: directory),
                "ed25519": try TestKey.generate(.ed25519, in: directory),
                "ed25519b": try TestKey.generate(.ed25519, in: directory),
            ]
        } catch {
            keys = [:]
        }
    }

    override class func tearDown() {
        if let directory { try? FileManager.default.removeItem(at: directory) }
        super.tearDown()
    }

    private func key(_ name: String) throws -> TestKey {
        guard let key = Self.keys[name] else { throw XCTSkip("openssl could not generate test keys") }
        return key
    }

    private let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9".utf8)

    /// (algorithm, signing key, another key of the same kind)
    private var cases: [(JWSAlgorithm, String, String)] {
        [(.rs256, "rsa", "rsa2"), (.ps256, "rsa", "rsa2"), (.es256, "p256", "p256b"), (.edDSA, "ed25519", "ed25519b")]
    }

    func testEachAlgorithmVerifies() throws {
        for (algorithm, signer, _) in cases + [(.es384, "p384", "p384")] {
            let key = try key(signer)
            let signature = try key.sign(message, algorithm)
            let publicKey = try key.jwk.publicKey()
            XCTAssertNoThrow(try publicKey.verify(signature: signature, message: message, algorithm: algorithm), "\(algorithm)")
        }
    }

    func testFlippedBitTruncationAndWrongKeyAreRefused() throws {
        for (algorithm, signer, other) in cases + [(.es384, "p384", "")] {
            let key = try key(signer)
            let signature = try key.sign(message, algorithm)
            let publicKey = try key.jwk.publicKey()
            for bit in [0, signature.count * 4, signature.count * 8 - 1] {
                var flipped = signature
                flipped[bit / 8] ^= 1 << UInt8(bit % 8)
                assertRefused(publicKey, flipped, algorithm, "\(algorithm) bit \(bit)")
            }
            var changed = message
            changed[changed.count - 1] ^= 1
            assertRefused(publicKey, signature, algorithm, "\(algorithm) other message", message: changed)
            assertRefused(publicKey, Array(signature.dropLast()), algorithm, "\(algorithm) truncated")
            assertRefused(publicKey, [], algorithm, "\(algorithm) empty")
            assertRefused(publicKey, signature + [0], algorithm, "\(algorithm) extended")
            if !other.isEmpty {
                assertRefused(try self.key(other).jwk.publicKey(), signature, algorithm, "\(algorithm) wrong key")
            }
        }
    }

    func testKeyMustFitAlgorithm() throws {
        let rsa = try key("rsa").jwk.publicKey()
        let p256 = try key("p256").jwk.publicKey()
        let p384 = try key("p384").jwk.publicKey()
        let ed = try key("ed25519").jwk.publicKey()
        let es256 = try key("p256").sign(message, .es256)
        // ES256 signature checked against a P-384 key (the wrong curve), and ES384 asked of a P-256 key.
        XCTAssertThrowsError(try p384.verify(signature: es256, message: message, algorithm: .es256)) {
            XCTAssertEqual($0 as? CryptoError, .keyDoesNotFitAlgorithm("a P-384 key cannot verify an ES256 signature"))
        }
        XCTAssertThrowsError(try p256.verify(signature: es256 + es256.prefix(32), message: message, algorithm: .es384)) {
            guard case .keyDoesNotFitAlgorithm = $0 as? CryptoError else { return XCTFail("\($0)") }
        }
        for (key, algorithm) in [(rsa, JWSAlgorithm.es256), (rsa, .edDSA), (p256, .rs256), (ed, .ps256), (p256, .edDSA)] {
            XCTAssertFalse(key.fits(algorithm))
            XCTAssertThrowsError(try key.verify(signature: es256, message: message, algorithm: algorithm)) {
                guard case .keyDoesNotFitAlgorithm = $0 as? CryptoError else { return XCTFail("\($0)") }
            }
        }
    }

    func testPSSWithAnotherSaltLengthIsRefused() throws {
        let key = try key("rsa")
        let publicKey = try key.jwk.publicKey()
        let signature = try key.sign(message, .ps256, pssSaltLength: "max")
        assertRefused(publicKey, signature, .ps256, "PS256 with the maximum salt")
        // A PKCS#1 v1.5 signature is not a PSS one, nor the other way round.
        assertRefused(publicKey, try key.sign(message, .rs256), .ps256, "RS256 as PS256")
        assertRefused(publicKey, try key.sign(message, .ps256), .rs256, "PS256 as RS256")
    }

    func testHostileKeysAreRefused() throws {
        let p256 = try key("p256").jwk
        let rsa = try key("rsa").jwk
        let hostile: [(JWK, String)] = [
            (JWK(kty: "RSA", n: "%%%", e: "AQAB"), "bad base64url"),
            (JWK(kty: "RSA", n: rsa.n), "no exponent"),
            (JWK(kty: "RSA", n: Base64URL.encode([UInt8](repeating: 0xFF, count: 64)), e: "AQAB"), "512-bit modulus"),
            (JWK(kty: "RSA", n: Base64URL.encode([UInt8](repeating: 0xFF, count: 4096)), e: "AQAB"), "32768-bit modulus"),
            (JWK(kty: "RSA", n: Base64URL.encode([UInt8](repeating: 0xFF, count: 255) + [0xFE]), e: "AQAB"), "even modulus"),
            (JWK(kty: "RSA", n: rsa.n, e: "AQ"), "exponent 1"),
            (JWK(kty: "RSA", n: rsa.n, e: "AQAA"), "even exponent"),
            (JWK(kty: "RSA", n: rsa.n, e: Base64URL.encode([UInt8](repeating: 0xFF, count: 300))), "huge exponent"),
            (JWK(kty: "EC", crv: "P-256", x: p256.x), "no y"),
            (JWK(kty: "EC", crv: "P-256", x: p256.x, y: Base64URL.encode([UInt8](repeating: 1, count: 32))), "point off the curve"),
            (JWK(kty: "EC", crv: "P-384", x: p256.x, y: p256.y), "P-256 point called P-384"),
            (JWK(kty: "EC", crv: "P-256", x: Base64URL.encode([0] + (Base64URL.decode(p256.x ?? "") ?? [])), y: p256.y), "33-byte x"),
            (JWK(kty: "EC", crv: "secp256k1", x: p256.x, y: p256.y), "unsupported curve"),
            (JWK(kty: "EC", x: p256.x, y: p256.y), "no curve"),
            (JWK(kty: "OKP", crv: "Ed25519", x: Base64URL.encode([1, 2, 3])), "short Ed25519 key"),
            (JWK(kty: "OKP", crv: "X25519", x: Base64URL.encode([UInt8](repeating: 9, count: 32))), "X25519"),
            (JWK(kty: "oct", n: "AAAA"), "symmetric key"),
        ]
        for (jwk, what) in hostile {
            XCTAssertThrowsError(try jwk.publicKey(), what) {
                guard case .invalidKey = $0 as? CryptoError else { return XCTFail("\(what): \($0)") }
            }
        }
    }

    func testJWKUsability() throws {
        let rsa = try key("rsa")
        XCTAssertTrue(rsa.jwk(kid: "a").isUsable(for: .rs256))
        XCTAssertTrue(rsa.jwk(kid: "a", use: nil).isUsable(for: .ps256))
        XCTAssertFalse(rsa.jwk(kid: "a", use: "enc").isUsable(for: .rs256))
        XCTAssertFalse(rsa.jwk(kid: "a", alg: "PS256").isUsable(for: .rs256))
        XCTAssertTrue(rsa.jwk(kid: "a", alg: "PS256").isUsable(for: .ps256))
        XCTAssertFalse(rsa.jwk(kid: "a").isUsable(for: .es256))
        var restricted = rsa.jwk(kid: "a")
        restricted.keyOps = ["encrypt"]
        XCTAssertFalse(restricted.isUsable(for: .rs256))
        let p384 = try key("p384").jwk(kid: "b")
        XCTAssertTrue(p384.isUsable(for: .es384))
        XCTAssertFalse(p384.isUsable(for: .es256))
        XCTAssertTrue(try key("ed25519").jwk(kid: "c").isUsable(for: .edDSA))
        XCTAssertNil(JWSAlgorithm(rawValue: "none"))
        XCTAssertNil(JWSAlgorithm(rawValue: "HS256"))
        XCTAssertNil(JWSAlgorithm(rawValue: "rs256"))
    }

    func testJWKDecodesFromJSONAndDropsPrivateMembers() throws {
        let json = #"{"kty":"EC","crv":"P-256","kid":"k","use":"sig","key_ops":["verify"],"x":"AA","y":"AA","d":"secret"}"#
        let jwk = try JSONDecoder().decode(JWK.self, from: Data(json.utf8))
        XCTAssertEqual(jwk, JWK(kty: "EC", kid: "k", use: "sig", keyOps: ["verify"], crv: "P-256", x: "AA", y: "AA"))
        XCTAssertFalse(String(decoding: try JSONEncoder().encode(jwk), as: UTF8.self).contains("secret"))
    }

    private func assertRefused(_ key: PublicKey, _ signature: [UInt8], _ algorithm: JWSAlgorithm, _ what: String,
                               message: [UInt8]? = nil, line: UInt = #line) {
        XCTAssertThrowsError(try key.verify(signature: signature, message: message ?? self.message, algorithm: algorithm),
                             what, line: line) {
            guard case .invalidSignature = $0 as? CryptoError else { return XCTFail("\(what): \($0)", line: line) }
        }
    }
}
