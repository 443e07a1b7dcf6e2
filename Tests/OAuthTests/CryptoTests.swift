import BrokerCrypto
import OAuth
import XCTest

final class CryptoTests: XCTestCase {
    func testBase64URLRoundTripAndAlphabet() {
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 37 + 250) }
            let text = Base64URL.encode(bytes)
            XCTAssertFalse(text.contains("=") || text.contains("+") || text.contains("/"))
            XCTAssertEqual(Base64URL.decode(text), bytes)
        }
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF]), "-_8")
        XCTAssertEqual(Base64URL.encode(Array("foobar".utf8)), "Zm9vYmFy")
        XCTAssertEqual(Base64URL.encode(Array("fo".utf8)), "Zm8")
        XCTAssertEqual(Base64URL.decode("Zm8="), Array("fo".utf8))
        XCTAssertNil(Base64URL.decode("Zm9vY"))
        XCTAssertNil(Base64URL.decode("Zm+v"))
    }

    func testSHA256KnownAnswers() {
        let abc = SHA256.hash(Array("abc".utf8)).map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(abc, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let empty = SHA256.hash([]).map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(empty, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testSecureRandom() {
        XCTAssertEqual(SecureRandom.bytes(0), [])
        XCTAssertEqual(SecureRandom.bytes(1000).count, 1000)
        XCTAssertNotEqual(SecureRandom.bytes(32), SecureRandom.bytes(32))
        let token = SecureRandom.token()
        XCTAssertEqual(token.count, 43)
        XCTAssertEqual(Base64URL.decode(token)?.count, 32)
    }

    func testPKCEMatchesRFC7636AppendixB() {
        let octets: [UInt8] = [116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186,
                               22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121]
        XCTAssertEqual(Base64URL.encode(octets), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        let pair = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        XCTAssertEqual(pair.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        XCTAssertEqual(PKCE().verifier.count, 43)
        XCTAssertEqual(PKCE.method, "S256")
    }
}
