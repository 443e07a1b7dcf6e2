import BrokerCrypto
import Foundation
import OAuth
import XCTest

/// Real ID tokens from a real Glewlwyd (scripts/glewlwyd): RS256 for the client
/// `authbroker`, ES256 for `authbroker-es256`, both obtained by the authorization-code
/// flow with PKCE and a nonce (Tests/IntegrationTests/support/glewlwyd_api.py plays the
/// browser), then verified with the provider's real discovery document and JWKS.
/// Skipped when Glewlwyd is not installed.
final class GlewlwydIDTokenTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private var directory: URL?

    override func tearDown() async throws {
        if let directory {
            _ = try? run(["python3", Self.repository.appendingPathComponent("scripts/glewlwyd").path, "stop", directory.path])
            try? FileManager.default.removeItem(at: directory)
        }
    }

    func testGlewlwydTokensSignedRS256AndES256Verify() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/glewlwyd") else {
            throw XCTSkip("Glewlwyd is not installed: run scripts/setup")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("authbroker-gw-\(UUID().uuidString)")
        self.directory = directory
        let script = Self.repository.appendingPathComponent("scripts/glewlwyd").path
        // The script picks a free port; a rare race with another process is retried once.
        if (try? run(["python3", script, "start", directory.path])) == nil {
            try run(["python3", script, "start", directory.path])
        }
        let nonce = SecureRandom.token()
        let answer = try run(["python3", "-c", Self.signIn, Self.repository.appendingPathComponent("Tests/IntegrationTests/support").path,
                              directory.path, nonce])
        struct SignIns: Decodable { var issuer: String; var tokens: [String: String] }
        let signIns = try JSONDecoder().decode(SignIns.self, from: Data(answer))

        let transport = NetworkTransport(timeout: 10)
        let metadata = try await OAuthClient(configuration: ClientConfiguration(issuer: signIns.issuer, clientID: "authbroker"),
                                             transport: transport).discover()
        let verifier = IDTokenVerifier(keys: JWKSCache(transport: transport))
        for (client, algorithm) in [("authbroker", "RS256"), ("authbroker-es256", "ES256")] {
            let token = try XCTUnwrap(signIns.tokens[client], "no ID token for \(client)")
            let header = try XCTUnwrap(token.split(separator: ".").first.flatMap { Base64URL.decode(String($0)) })
            XCTAssertTrue(String(decoding: header, as: UTF8.self).contains(#""alg":"\#(algorithm)""#), "\(client) is not signed \(algorithm)")
            let claims = try await verifier.verify(token, metadata: metadata, clientID: client, nonce: nonce)
            XCTAssertEqual(claims.iss, signIns.issuer)
            XCTAssertEqual(claims.aud, [client])
            XCTAssertEqual(claims.nonce, nonce)
            XCTAssertFalse(claims.sub.isEmpty)

            // The same real token, refused for another client, another nonce, or one changed byte.
            let other = client == "authbroker" ? "authbroker-es256" : "authbroker"
            await assertRefused(verifier, token, metadata, client: other, nonce: nonce, .wrongAudience)
            await assertRefused(verifier, token, metadata, client: client, nonce: "another", .wrongNonce)
            var segments = token.split(separator: ".").map(String.init)
            var payload = try XCTUnwrap(Base64URL.decode(segments[1]))
            payload[payload.count / 2] ^= 0x01
            segments[1] = Base64URL.encode(payload)
            await assertRefused(verifier, segments.joined(separator: "."), metadata, client: client, nonce: nonce, .badSignature)
        }
        let requests = await verifier.keys.requestCount[metadata.jwksURI ?? ""]
        XCTAssertEqual(requests, 1, "Glewlwyd's JWKS is fetched once for both keys")
    }

    private func assertRefused(_ verifier: IDTokenVerifier, _ token: String, _ metadata: ProviderMetadata, client: String,
                               nonce: String, _ reason: IDTokenError.Reason, line: UInt = #line) async {
        do {
            _ = try await verifier.verify(token, metadata: metadata, clientID: client, nonce: nonce)
            XCTFail("accepted", line: line)
        } catch {
            XCTAssertEqual(error.reason, reason, line: line)
        }
    }

    /// Signs alice in to both clients with the code flow and prints the issuer and the
    /// ID tokens as JSON on stdout (read by the test only, never shown).
    private static let signIn = """
        import base64, hashlib, json, secrets, sys, urllib.parse
        sys.path.insert(0, sys.argv[1])
        from glewlwyd_api import Glewlwyd
        gw = Glewlwyd(sys.argv[2])
        session = gw.login_session("alice")
        tokens = {}
        for client in ["authbroker", "authbroker-es256"]:
            verifier = secrets.token_urlsafe(32)
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            location = gw.authorize_code(session, client, "http://127.0.0.1/callback", "openid profile email",
                                         secrets.token_urlsafe(8), sys.argv[3], challenge)
            code = urllib.parse.parse_qs(urllib.parse.urlparse(location).query)["code"][0]
            answer = gw.exchange_code(client, code, "http://127.0.0.1/callback", code_verifier=verifier)
            if answer.status != 200:
                sys.exit(f"token endpoint answered HTTP {answer.status} for {client}")
            tokens[client] = answer.json["id_token"]
        print(json.dumps({"issuer": gw.issuer, "tokens": tokens}))
        """

    /// Runs a command and returns its stdout; stderr goes to the test log (no tokens there).
    @discardableResult
    private func run(_ arguments: [String]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "GlewlwydIDTokenTests", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "\(arguments.prefix(3).joined(separator: " ")) failed"])
        }
        return Array(data)
    }
}
