import BrokerCrypto
import Foundation
import JWSTestSupport
import XCTest

/// Keys made by BrokerCrypto sign; BrokerCrypto's verifier (and the openssl tool, for the
/// stored form) check the result.
final class SigningKeyTests: XCTestCase {
    private let message = Array("eyJ0eXAiOiJkcG9wK2p3dCJ9.eyJodG0iOiJQT1NUIn0".utf8)

    func testEachAlgorithmSignsWhatItsPublicJWKVerifies() throws {
        for algorithm in SigningKey.algorithms {
            let key = try SigningKey.generate(algorithm)
            let signature = try key.sign(message)
            let jwk = try key.publicJWK()
            XCTAssertEqual(jwk.kty, algorithm.keyType)
            XCTAssertEqual(jwk.crv, algorithm.curveName)
            if algorithm == .es256 { XCTAssertEqual(signature.count, 64, "ES256 is r‖s, not DER") }
            let publicKey = try jwk.publicKey()
            XCTAssertNoThrow(try publicKey.verify(signature: signature, message: message, algorithm: algorithm), "\(algorithm)")
            var changed = message
            changed[0] ^= 1
            XCTAssertThrowsError(try publicKey.verify(signature: signature, message: changed, algorithm: algorithm))
            // Another key of the same kind does not verify it.
            let other = try SigningKey.generate(algorithm).publicJWK().publicKey()
            XCTAssertThrowsError(try other.verify(signature: signature, message: message, algorithm: algorithm))
        }
    }

    func testECDSASignaturesWithShortRAndSKeepTheirLength() throws {
        // About one signature in 128 has an r or s below 2^248; DER drops the leading zero.
        let key = try SigningKey.generate(.es256)
        let publicKey = try key.publicJWK().publicKey()
        for _ in 0..<300 {
            let signature = try key.sign(message)
            XCTAssertEqual(signature.count, 64)
            XCTAssertNoThrow(try publicKey.verify(signature: signature, message: message, algorithm: .es256))
        }
    }

    func testStoredKeyReadsBackAndOpenSSLReadsIt() throws {
        let directory = try OpenSSLTool.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for algorithm in SigningKey.algorithms {
            let key = try SigningKey.generate(algorithm)
            let der = try key.pkcs8()
            let again = try SigningKey(pkcs8: der, algorithm: algorithm)
            XCTAssertEqual(try again.publicJWK(), try key.publicJWK())
            XCTAssertNoThrow(try key.publicJWK().publicKey().verify(signature: try again.sign(message), message: message, algorithm: algorithm))
            // The openssl tool reads the same bytes as a PKCS#8 private key with the same public half.
            let path = directory.appendingPathComponent("\(algorithm.rawValue).der").path
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(der)))
            let spki = try OpenSSLTool.run(["pkey", "-inform", "DER", "-in", path, "-pubout", "-outform", "DER"])
            switch algorithm {
            case .es256: XCTAssertEqual(Array(spki.suffix(64)), Base64URL.decode(try key.publicJWK().x!)! + Base64URL.decode(try key.publicJWK().y!)!)
            case .edDSA: XCTAssertEqual(Array(spki.suffix(32)), Base64URL.decode(try key.publicJWK().x!)!)
            default: XCTAssertTrue(spki.count > 256)
            }
        }
    }

    func testAStoredKeyOfAnotherTypeOrGarbageIsRefused() throws {
        let ed = try SigningKey.generate(.edDSA).pkcs8()
        XCTAssertThrowsError(try SigningKey(pkcs8: ed, algorithm: .es256)) {
            guard case .keyDoesNotFitAlgorithm = $0 as? CryptoError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try SigningKey(pkcs8: [0x30, 0x03, 0x02, 0x01, 0x00], algorithm: .es256))
        XCTAssertThrowsError(try SigningKey(pkcs8: [], algorithm: .edDSA))
        XCTAssertThrowsError(try SigningKey.generate(.ps256))
    }

    func testDescriptionNamesNoKeyMaterial() throws {
        XCTAssertEqual("\(try SigningKey.generate(.es256))", "ES256 signing key")
    }

    /// RFC 7638 §3.1's example.
    func testThumbprintOfRFC7638Example() {
        let jwk = JWK(kty: "RSA", alg: "RS256",
                      n: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
                      e: "AQAB")
        XCTAssertEqual(jwk.thumbprint(), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        XCTAssertNil(JWK(kty: "EC", crv: "P-256", x: "AA").thumbprint())
        XCTAssertNil(JWK(kty: "oct").thumbprint())
    }
}
