@testable import BrokerCore
import BrokerProtocol
import Foundation
import XCTest

/// Issue 24, item 7: the sentences and log lines a user reads when a provider refuses, is
/// misconfigured or is down.
final class WhatTheUserIsToldTests: XCTestCase {
    // MARK: invalid_request for a refresh token the provider no longer has

    func testInvalidRequestNamingTheRefreshTokenAsksForANewSignInLikeInvalidGrant() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        h.clock.advance(3600)
        // Dex's answer for a refresh token it no longer has (a STUB provider sends it here).
        h.transport.script(.described("invalid_request", "Refresh token is invalid or has already been claimed by another client."))
        let error = await h.tokenError()
        guard case .loginRequired(provider: "corp", let message) = error else {
            return XCTFail("expected login required, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("run `authctl login --provider corp`"), message)
        let accounts = h.broker.accounts.accountList().accounts
        XCTAssertEqual(accounts.map(\.state), [.loginRequired])
        // Not asked again: the refusal stands until a new sign-in.
        let requests = h.transport.tokenRequests.count
        _ = await h.tokenError()
        XCTAssertEqual(h.transport.tokenRequests.count, requests)
    }

    func testAnyOtherInvalidRequestToARefreshStillSaysWhatToDoNext() async throws {
        let h = try await BrokerHarness()
        _ = try await h.token()
        h.clock.advance(3600)
        h.transport.script(.error("invalid_request"))
        let error = await h.tokenError()
        guard case .providerError(provider: "corp", oauthError: "invalid_request", let message) = error else {
            return XCTFail("expected the provider's invalid_request, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("authctl login --provider corp"), message)
        // Not enough to give the sign-in up: the account stays ready.
        let accounts = h.broker.accounts.accountList().accounts
        XCTAssertEqual(accounts.map(\.state), [.ready])
    }

    // MARK: dpop = true at a provider that does not say it takes DPoP

    func testDPoPAtAProviderWhoseDiscoveryListsNoDPoPAlgorithmsIsRefusedNotServedAsBearer() async throws {
        let h = try await BrokerHarness(providerKeys: "dpop = true")
        let error = await h.tokenError()
        guard case .configuration(provider: "corp", let message) = error else {
            return XCTFail("expected a configuration error, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("dpop_signing_alg_values_supported"), message)
        XCTAssertTrue(message.contains("dpop"), message)
        XCTAssertEqual(h.transport.tokenRequests.count, 0, "no token is asked for, so none is served as Bearer")
    }

    func testABearerTokenFromAProviderThatShouldBindItIsNotServed() async throws {
        let h = try await BrokerHarness(providerKeys: "dpop = true")
        h.transport.discoveryExtra = #","dpop_signing_alg_values_supported":["ES256"]"#
        let error = await h.tokenError()  // the STUB answers Bearer whatever the proof
        guard case .configuration(provider: "corp", let message) = error else {
            return XCTFail("expected a configuration error, got \(String(describing: error))")
        }
        XCTAssertTrue(message.contains("Bearer"), message)
    }

    // MARK: the machine-account example of docs/sign-in.md

    func testTheMachineAccountExampleInTheDocsServesTheResourceItPromises() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/sign-in.md"), encoding: .utf8)
        let section = try XCTUnwrap(doc.components(separatedBy: "## Machine accounts").dropFirst().first)
        let snippet = try XCTUnwrap(section.components(separatedBy: "```toml\n").dropFirst().first?.components(separatedBy: "```").first)
        let promised = try XCTUnwrap(section.firstMatch(of: /authctl token --provider ci --resource (\S+)`/)?.1)
        // The example's provider, at the STUB provider's address.
        let config = snippet.split(separator: "\n").map { $0.hasPrefix("issuer") ? "issuer = \"\(StubTransport.issuer)\"" : String($0) }
            .joined(separator: "\n")
        let h = try await BrokerHarness(extraConfig: config)
        let answer = try await h.token(TokenGetParams(resource: String(promised), provider: "ci"))
        XCTAssertEqual(answer.resource, String(promised))
        XCTAssertEqual(h.transport.tokenRequests.last?["grant_type"], "client_credentials")
    }

    // MARK: one log line per provider and outage

    func testAnOutageLogsOneLineWithACountNotOneLinePerCachedAnswer() async throws {
        let h = try await BrokerHarness(refreshMargin: 60)
        _ = try await h.token()
        h.transport.down = true
        h.clock.advance(3600 - 50)  // inside the margin: every request tries the provider first
        for _ in 0..<20 {
            _ = try await h.token()
            h.clock.advance(1)
        }
        XCTAssertEqual(h.logs.matching("serving").count, 1, h.logs.all.joined(separator: "\n"))
        h.transport.down = false
        h.clock.advance(30)  // past any back-off
        _ = try await h.token()
        let summary = h.logs.matching("from the cache")
        XCTAssertEqual(summary.count, 1, h.logs.all.joined(separator: "\n"))
        XCTAssertTrue(summary.first?.contains("20 requests") == true, summary.joined())
        // A second outage gets its own line.
        h.transport.down = true
        h.clock.advance(3600 - 50)
        _ = try await h.token()
        XCTAssertEqual(h.logs.matching("serving").count, 2, h.logs.all.joined(separator: "\n"))
    }
}
