@testable import BrokerCore
import XCTest

/// The cache-hit path's shortcuts give the same answers as the long way.
final class CacheHitPathTests: XCTestCase {
    func testScopeOrderAndDuplicatesNeverMatter() {
        let account = AccountKey(provider: "corp", subject: "alice")
        let sorted = CacheKey(account: account, resource: "r", scopes: ["a", "b", "c"])
        XCTAssertEqual(CacheKey(account: account, resource: "r", scopes: ["c", "a", "b"]), sorted)
        XCTAssertEqual(CacheKey(account: account, resource: "r", scopes: ["b", "a", "c", "a"]), sorted)
        XCTAssertEqual(CacheKey(account: account, resource: "r", scopes: ["a", "a", "b", "c"]), sorted)
        XCTAssertEqual(CacheKey(account: account, resource: "r", scopes: ["a", "a"]).scopes, ["a"])
        XCTAssertEqual(CacheKey(account: account, resource: "r", scopes: []).scopes, [])
    }

    func testMatchFindsTheOneAccountOrSaysHowManyFit() {
        let registry = AccountRegistry()
        func account(_ provider: String, _ subject: String, _ username: String?) -> Account {
            Account(key: AccountKey(provider: provider, subject: subject), issuer: "https://idp", clientID: "c",
                    username: username, refreshToken: "rt", idToken: nil, state: .ready)
        }
        func subject(_ match: AccountRegistry.Match) -> String {
            switch match {
            case .one(let a): return a.key.subject
            case .none: return "none"
            case .several: return "several"
            }
        }
        XCTAssertEqual(subject(registry.match(provider: "corp", named: nil)), "none")
        registry.put(account("corp", "s1", "alice"))
        registry.put(account("other", "s9", "zoe"))
        XCTAssertEqual(subject(registry.match(provider: "corp", named: nil)), "s1")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "alice")), "s1")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "s1")), "s1")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "zoe")), "none")
        registry.put(account("corp", "s2", "bob"))
        // Two accounts: a request without a name must say which.
        XCTAssertEqual(subject(registry.match(provider: "corp", named: nil)), "several")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "bob")), "s2")
        // A username two accounts share is ambiguous; a subject never is, even one that is
        // another account's username.
        registry.put(account("corp", "s3", "bob"))
        registry.put(account("corp", "alice", nil))
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "bob")), "several")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "s3")), "s3")
        XCTAssertEqual(subject(registry.match(provider: "corp", named: "alice")), "alice")
    }
}
