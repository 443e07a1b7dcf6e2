@testable import BrokerCore
import BrokerProtocol
import OAuth
import XCTest

/// RFC 9470 step-up: a sign-in that asked for `acr_values` or `max_age` (a resource's
/// `insufficient_user_authentication`) keeps the account only when the ID token shows them;
/// providers may ignore both, and the resource would refuse the token again.
final class AuthenticationDemandTests: XCTestCase {
    private func claims(_ extra: [String: JSONValue]) throws -> IDTokenClaims {
        var all: [String: JSONValue] = ["iss": .string("https://idp"), "sub": .string("s"), "aud": .string("c"),
                                        "exp": .number(2_000_000_000), "iat": .number(1_999_999_000)]
        all.merge(extra) { $1 }
        return try IDTokenClaims(claims: all)
    }

    func testNoDemandWithoutThoseParameters() {
        XCTAssertNil(AuthenticationDemand(parameters: [("prompt", "login")]))
        XCTAssertEqual(AuthenticationDemand(parameters: [("acr_values", "mfa phr"), ("max_age", "60")]),
                       AuthenticationDemand(parameters: [("max_age", "60"), ("acr_values", "mfa phr")]))
    }

    func testAnAcrAskedForMustComeBack() throws {
        let demand = try XCTUnwrap(AuthenticationDemand(parameters: [("acr_values", "mfa phr")]))
        XCTAssertNoThrow(try demand.check(claims(["acr": .string("phr")]), provider: "corp", now: 1_999_999_100, skew: 300))
        XCTAssertThrowsError(try demand.check(claims(["acr": .string("pwd")]), provider: "corp", now: 1_999_999_100, skew: 300)) { error in
            XCTAssertEqual((error as? BrokerError)?.message, "corp signed you in, but its ID token has acr pwd, not one of mfa phr that were asked for (RFC 9470): the resource will refuse it again; ask corp's administrators which acr_values it honours, or sign in with the method the resource needs")
        }
        XCTAssertThrowsError(try demand.check(claims([:]), provider: "corp", now: 1_999_999_100, skew: 300))
    }

    func testMaxAgeCountsFromAuthTime() throws {
        let demand = try XCTUnwrap(AuthenticationDemand(parameters: [("max_age", "60")]))
        XCTAssertNoThrow(try demand.check(claims(["auth_time": .number(1_999_999_000)]), provider: "corp", now: 1_999_999_050, skew: 0))
        XCTAssertThrowsError(try demand.check(claims(["auth_time": .number(1_999_990_000)]), provider: "corp", now: 1_999_999_050, skew: 0)) { error in
            XCTAssertTrue((error as? BrokerError)?.message.contains("reused a sign-in of 9050 s ago although max_age=60") == true)
        }
        XCTAssertThrowsError(try demand.check(claims([:]), provider: "corp", now: 1_999_999_050, skew: 0)) { error in
            XCTAssertTrue((error as? BrokerError)?.message.contains("has no auth_time") == true)
        }
    }
}
