@testable import BrokerCore
import BrokerProtocol
import XCTest

/// `logout` with a refresh token per resource (`refresh_tokens = "one-per-resource"`): every
/// one of the account's refresh tokens is revoked (RFC 7009), whatever the provider answers
/// for another. STUB provider: Glewlwyd cannot be made to refuse the revocation of one
/// token and take the others.
final class SignOutRevocationTests: XCTestCase {
    func testARefusedRevocationDoesNotSkipTheOtherRefreshTokens() async throws {
        let h = try await BrokerHarness(providerKeys: #"refresh_tokens = "one-per-resource""#)
        h.transport.discoveryExtra = #","revocation_endpoint":"\#(StubTransport.issuer)/revoke""#
        h.broker.accounts.update(AccountKey(provider: "corp", subject: "sub-alice")) {
            $0.resourceRefreshTokens = ["https://api": "api-rt", "https://git": "git-rt"]
        }
        h.transport.refuseRevoking("refresh-0")
        let result = try await h.broker.signOut.logout(LogoutParams())
        XCTAssertEqual(Set(h.transport.revocations), Set(["refresh-0", "api-rt", "git-rt"].map(fingerprint)),
                       "a refresh token was left unrevoked at the provider after another's revocation was refused")
        XCTAssertFalse(result.revoked)
        let note = result.revocationNote ?? ""
        XCTAssertTrue(note.contains("refused the revocation"), note)
    }
}
