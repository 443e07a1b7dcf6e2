@testable import BrokerCore
import BrokerProtocol
import Foundation
import Logging
import XCTest

/// Issue 21 item 2: `token.exchange` names its target twice (`resource` and `audience`);
/// the policy and the provider's `resources` hold both, not one of them.
final class TokenExchangePolicyTests: XCTestCase {
    /// A broker with one rule: the test's own executable may have `https://api` only.
    private func harness(extra: String = "") async throws -> (BrokerHarness, CallerIdentification) {
        let exe = try XCTUnwrap(FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let h = try await BrokerHarness(providerKeys: extra + """

            [[allow]]
            exe = "\(exe)"
            resources = ["https://api"]
            """)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: exe,
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        return (h, { _ in me })
    }

    private func refusal(_ body: () throws(BrokerError) -> Void) -> BrokerError? {
        do throws(BrokerError) { try body(); return nil } catch { return error }
    }

    func testEveryTargetOfAnExchangeIsHeldToTheRule() async throws {
        let (h, me) = try await harness()
        XCTAssertNil(refusal { () throws(BrokerError) in try h.broker.authorize(.tokenExchange, TokenExchangeParams(resource: "https://api"), me) })
        XCTAssertNil(refusal { () throws(BrokerError) in try h.broker.authorize(.tokenExchange, TokenExchangeParams(audience: "https://api"), me) })
        // Named both ways, the audience is what Keycloak, Okta and Auth0 mint the token for.
        let both = refusal { () throws(BrokerError) in
            try h.broker.authorize(.tokenExchange, TokenExchangeParams(audience: "payroll", resource: "https://api"), me)
        }
        guard case .forbidden(let message)? = both else { return XCTFail("an audience the rule does not name was granted: \(String(describing: both))") }
        XCTAssertTrue(message.contains("payroll"), message)
        XCTAssertNotNil(refusal { () throws(BrokerError) in
            try h.broker.authorize(.tokenExchange, TokenExchangeParams(audience: "https://api", resource: "https://git"), me)
        }, "a resource the rule does not name is refused, whatever the audience")
    }

    /// Under a `confirm = true` rule the user is asked about what the new token is for:
    /// an exchange naming a resource and an audience is asked about both (the provider mints
    /// the token for the audience), and a yes to a token for the resource alone is no yes
    /// to it.
    func testAConfirmedExchangeAsksAboutItsAudienceToo() async throws {
        let exe = try XCTUnwrap(FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        let h = try await BrokerHarness(providerKeys: """

            [[allow]]
            exe = "\(exe)"
            confirm = true
            resources = ["https://api", "payroll"]
            """)
        let me = Caller(uid: getuid(), gid: getgid(), pid: getpid(), executable: exe,
                        executableID: FileID(path: "/proc/self/exe"), cgroup: nil)
        let identify: CallerIdentification = { _ in me }
        let get = try XCTUnwrap(try h.broker.authorize(.tokenGet, TokenGetParams(resource: "https://api"), identify))
        let exchange = try XCTUnwrap(try h.broker.authorize(.tokenExchange, TokenExchangeParams(audience: "payroll", resource: "https://api"), identify))
        // What the user reads names the audience (here the refusal that follows a Deny).
        let denying = CallerGate(source: FixedPolicy(h.broker.gate.policy, defaultProvider: "corp"), confirmer: Denying(),
                                 logger: Logger(label: "test"))
        do {
            try await denying.confirm(exchange, on: ConfirmAnswers())
            XCTFail("a Deny served the exchange")
        } catch {
            XCTAssertTrue("\(error)".contains("payroll"), "the question hid the audience: \(error)")
        }
        let answers = ConfirmAnswers()
        _ = await answers.answer(get) { .allowed }
        XCTAssertTrue(answers.allowed(get))
        XCTAssertFalse(answers.allowed(exchange), "a yes to a token for https://api served a token for payroll unasked")
    }

    func testTheExchangesResourceMustBeOneOfTheProvidersResources() async throws {
        let h = try await BrokerHarness()
        do {
            _ = try await h.broker.exchange.exchangeToken(TokenExchangeParams(audience: "orders", resource: "https://made-up.example"))
            XCTFail("a resource outside [providers.corp] resources was exchanged for")
        } catch {
            guard case .invalidRequest(let message) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("resources"), message)
        }
        XCTAssertEqual(h.transport.tokenRequests.count, 0, "refused without asking the provider")
        // A configured one is exchanged for (the stub mints anything it is asked).
        _ = try await h.broker.exchange.exchangeToken(TokenExchangeParams(audience: "orders", resource: "https://git"))
        XCTAssertTrue(h.transport.tokenRequests.last?["grant_type"]?.contains("token-exchange") == true)
    }
}

/// The user's Deny to every question.
private struct Denying: CallerConfirming {
    func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer { .denied }
}
