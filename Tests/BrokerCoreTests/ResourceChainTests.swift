@testable import BrokerCore
import SecretStore
import XCTest

/// `refresh_tokens = "one-per-resource"`: which refresh token a request uses, and how the
/// account's Secret Service item keeps them (old items still read).
final class ResourceChainTests: XCTestCase {
    func account() -> Account {
        var a = Account(key: AccountKey(provider: "corp", subject: "alice"), issuer: "https://idp", clientID: "c",
                        username: "alice", refreshToken: "main", idToken: nil, state: .ready)
        a.resourceRefreshTokens = ["https://git": "git-rt"]
        a.rotatedFor = "https://api"
        return a
    }

    func testARequestUsesItsResourcesOwnRefreshTokenOnlyWhenConfigured() {
        let a = account()
        XCTAssertEqual(a.chain(for: "https://git", rule: .onePerResource), "https://git")
        XCTAssertEqual(a.refreshToken(of: a.chain(for: "https://git", rule: .onePerResource)), "git-rt")
        XCTAssertNil(a.chain(for: "https://api", rule: .onePerResource), "no sign-in of its own: the main one")
        XCTAssertNil(a.chain(for: nil, rule: .onePerResource))
        XCTAssertNil(a.chain(for: "https://git", rule: .shared))
        XCTAssertEqual(a.refreshToken(of: nil), "main")
    }

    func testTheItemKeepsTheResourcesRefreshTokensAndOldItemsStillRead() throws {
        let item = AccountSecret.credential(for: account())
        let read = try XCTUnwrap(AccountSecret.account(from: item))
        XCTAssertEqual(read.refreshToken, "main")
        XCTAssertEqual(read.resourceRefreshTokens, ["https://git": "git-rt"])
        XCTAssertEqual(read.rotatedFor, "https://api")

        let old = StoredCredential(provider: "corp", issuer: "https://idp", clientID: "c", subject: "alice", label: "x",
                                   secret: #"{"version":1,"refresh_token":"rt","username":"alice"}"#)
        let before = try XCTUnwrap(AccountSecret.account(from: old))
        XCTAssertEqual(before.refreshToken, "rt")
        XCTAssertEqual(before.resourceRefreshTokens, [:])
        XCTAssertNil(before.rotatedFor)
    }
}
