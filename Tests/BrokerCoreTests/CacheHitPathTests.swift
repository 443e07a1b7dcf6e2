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

    func testResolveFindsTheOneAccountOrStepsAside() {
        let registry = AccountRegistry()
        func account(_ provider: String, _ subject: String, _ username: String?) -> Account {
            Account(key: AccountKey(provider: provider, subject: subject), issuer: "https://idp", clientID: "c",
                    username: username, refreshToken: "rt", idToken: nil, state: .ready)
        }
        XCTAssertNil(registry.resolve(provider: "corp", named: nil))
        registry.put(account("corp", "s1", "alice"))
        registry.put(account("other", "s9", "zoe"))
        XCTAssertEqual(registry.resolve(provider: "corp", named: nil)?.key.subject, "s1")
        XCTAssertEqual(registry.resolve(provider: "corp", named: "alice")?.key.subject, "s1")
        XCTAssertEqual(registry.resolve(provider: "corp", named: "s1")?.key.subject, "s1")
        XCTAssertNil(registry.resolve(provider: "corp", named: "zoe"))
        registry.put(account("corp", "s2", "bob"))
        // Two accounts: a request without a name is the full path's to answer (it says which).
        XCTAssertNil(registry.resolve(provider: "corp", named: nil))
        XCTAssertEqual(registry.resolve(provider: "corp", named: "bob")?.key.subject, "s2")
    }
}
