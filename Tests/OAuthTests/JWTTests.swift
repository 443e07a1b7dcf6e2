import BrokerCrypto
import Foundation
import OAuth
import XCTest

final class JWTTests: XCTestCase {
    private func jwt(_ claims: String) -> String {
        Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
    }

    func testClaimsDecode() throws {
        let token = jwt(#"{"iss":"https://idp.example","sub":"u1","aud":"broker","exp":2000000000,"iat":1999999000,"nonce":"n","preferred_username":"ann","email":"ann@example.org","groups":["a"]}"#)
        let claims = try IDTokenClaims(jwt: token)
        XCTAssertEqual(claims.iss, "https://idp.example")
        XCTAssertEqual(claims.aud, ["broker"])
        XCTAssertEqual(claims.exp, Date(timeIntervalSince1970: 2_000_000_000))
        XCTAssertEqual(claims.preferredUsername, "ann")
        XCTAssertEqual(claims.all["groups"], .array([.string("a")]))
        XCTAssertEqual(JWT.decodeClaims(token)?["sub"], .string("u1"))
        XCTAssertNil(JWT.decodeClaims("not-a-jwt"))
        XCTAssertNil(JWT.decodeClaims("a.%%%.c"))
    }

    func testValidateBasic() throws {
        let claims = try IDTokenClaims(jwt: jwt(#"{"iss":"https://idp.example","sub":"u1","aud":["broker","other"],"azp":"broker","exp":1000,"iat":900}"#))
        let now = Date(timeIntervalSince1970: 950)
        XCTAssertNoThrow(try claims.validateBasic(issuer: "https://idp.example", clientID: "broker", now: now))
        XCTAssertNoThrow(try claims.validateBasic(issuer: "https://idp.example", clientID: "broker", now: Date(timeIntervalSince1970: 1030)))
        for (issuer, client, time) in [("https://other.example", "broker", 950.0), ("https://idp.example", "nobody", 950),
                                        ("https://idp.example", "broker", 1100)] {
            XCTAssertThrowsError(try claims.validateBasic(issuer: issuer, clientID: client, now: Date(timeIntervalSince1970: time))) {
                guard case OAuthError.invalidResponse = $0 else { return XCTFail("got \($0)") }
            }
        }
        XCTAssertThrowsError(try IDTokenClaims(jwt: jwt(#"{"iss":"x","sub":"u","exp":1,"iat":1}"#)))
    }
}
