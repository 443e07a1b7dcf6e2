@testable import authctl
import BrokerProtocol
import XCTest

/// The reading of `WWW-Authenticate` and the decisions `authctl exec --retry-on-exit`
/// makes from what the command wrote: the same cases as clients/python's
/// (Tests/IntegrationTests/test_client_challenges.py) and clients/go's, so that all of them
/// do the same.
final class ChallengeTests: XCTestCase {
    typealias C = Challenge

    func testTheParserReadsRFC9110Challenges() {
        let cases: [([String], [Challenge])] = [
            (["Bearer realm=\"example\", error=\"invalid_token\", error_description=\"The access token expired\""],
             [C(scheme: "bearer", params: ["realm": "example", "error": "invalid_token", "error_description": "The access token expired"])]),
            // RFC 9110 §11.6.1's own example: two challenges, an escaped quote, a token value.
            (["Newauth realm=\"apps\", type=1, title=\"Login to \\\"apps\\\"\", Basic realm=\"simple\""],
             [C(scheme: "newauth", params: ["realm": "apps", "type": "1", "title": "Login to \"apps\""]),
              C(scheme: "basic", params: ["realm": "simple"])]),
            (["Basic dXNlcjpwYXNz==, Bearer"], [C(scheme: "basic", token68: "dXNlcjpwYXNz=="), C(scheme: "bearer")]),
            (["Negotiate abc/+~.-_=, DPoP algs=ES256"], [C(scheme: "negotiate", token68: "abc/+~.-_="), C(scheme: "dpop", params: ["algs": "ES256"])]),
            (["Bearer error = invalid_token ,scope= \"a b\""], [C(scheme: "bearer", params: ["error": "invalid_token", "scope": "a b"])]),
            (["BEARER ERROR=\"x\", Error=\"second\""], [C(scheme: "bearer", params: ["error": "x"])]),  // lowercased; first kept
            (["Bearer realm=\"a,b\", scope=\"x\""], [C(scheme: "bearer", params: ["realm": "a,b", "scope": "x"])]),
            (["Bearer resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""],
             [C(scheme: "bearer", params: ["resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"])]),
            (["Bearer realm=\"\""], [C(scheme: "bearer", params: ["realm": ""])]),
            (["Bearer a=\"\\\\\""], [C(scheme: "bearer", params: ["a": "\\"])]),
            ([", ,Bearer,, Basic ,"], [C(scheme: "bearer"), C(scheme: "basic")]),
            // Malformed elements are skipped; what parses around them is kept.
            (["Bearer realm=\"unterminated"], [C(scheme: "bearer")]),
            (["Bearer error=invalid token, scope=a"], [C(scheme: "bearer", params: ["scope": "a"])]),
            (["error=\"orphan\", Bearer"], [C(scheme: "bearer")]),
            (["Bearer \"x\", error=\"not Bearer's\""], [C(scheme: "bearer")]),
            (["Basic realm=\"a\", Bad/scheme x, error=\"not Basic's\""], [C(scheme: "basic", params: ["realm": "a"])]),
            (["Bearer =x, =, =="], []),
            (["Bearer  , =, =="], [C(scheme: "bearer")]),
            (["Bearer realm="], [C(scheme: "bearer", token68: "realm=")]),
            ([""], []), ([",,,"], []), (["   "], []), (["\""], []), (["\\"], []), (["é Bearer"], []), ([], []),
            (["Bearer error=a", "DPoP error=\"b\""], [C(scheme: "bearer", params: ["error": "a"]), C(scheme: "dpop", params: ["error": "b"])]),
        ]
        for (header, expected) in cases {
            XCTAssertEqual(Challenge.parse(header), expected, "\(header)")
        }
    }

    func testNoHeaderMakesTheParserOrTheDecisionTrap() {
        var rng = SystemRandomNumberGenerator()
        let pieces = ["Bearer", "DPoP", "Basic", "bearer", " ", "\t", ",", "=", "\"", "\\", "error", "invalid_token",
                      "insufficient_scope", "scope", "resource_metadata", "a/b", "x==", "é", "\u{0}", ";", "realm", "max_age"]
        for _ in 0..<3000 {
            let header = (0..<Int.random(in: 0...14, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let parsed = Challenge.parse(header)
            for c in parsed {
                XCTAssertFalse(c.scheme.isEmpty)
                XCTAssertEqual(c.scheme, c.scheme.lowercased())
                XCTAssertTrue(c.params.keys.allSatisfy { $0 == $0.lowercased() })
            }
            for status in [401, 403] {
                XCTAssertNotNil(ChallengeDecision.decide(status: status, parsed, sentToken: Bool.random(using: &rng), scopes: ["a"],
                                                         dpop: true, dpopNonce: "n"))
            }
        }
    }

    struct Case {
        var status: Int
        var header: String
        var sentToken = true
        var scopes: [String] = []
        var dpop = false
        var nonce: String?
        var action: ChallengeDecision.Action?
        var check: (ChallengeDecision) -> Bool = { _ in true }
    }

    func testWhatAChallengeAsksFor() {
        let cases = [
            Case(status: 401, header: "Bearer error=\"invalid_token\"", action: .newToken),
            Case(status: 401, header: "Bearer realm=\"api\"", action: nil),
            Case(status: 401, header: "Bearer resource_metadata=\"https://r/.well-known/oauth-protected-resource\"", action: .discover,
                 check: { $0.resourceMetadata == "https://r/.well-known/oauth-protected-resource" }),
            // An error code decides before resource_metadata (RFC 9728 §5.1 names where, not what).
            Case(status: 401, header: "Bearer error=\"invalid_token\", resource_metadata=\"https://r/m\"", action: .newToken),
            Case(status: 401, header: "Bearer resource_metadata=\"https://r/m\"", sentToken: false, action: .discover,
                 check: { $0.resourceMetadata == "https://r/m" }),
            Case(status: 401, header: "Bearer realm=\"mcp\"", sentToken: false, action: .discover, check: { $0.resourceMetadata == nil }),
            Case(status: 401, header: "Bearer error=\"invalid_token\"", sentToken: false, action: .discover),
            Case(status: 403, header: "Bearer resource_metadata=\"https://r/m\"", action: nil),
            Case(status: 403, header: "Bearer error=\"insufficient_scope\", scope=\"files:write files:read\"", scopes: ["files:read"],
                 action: .moreScopes, check: { $0.scopes == ["files:read", "files:write"] }),
            Case(status: 403, header: "Bearer error=\"insufficient_scope\", scope=\"b\"", scopes: ["a", "c"], action: .moreScopes,
                 check: { $0.scopes == ["a", "c", "b"] }),
            Case(status: 403, header: "Bearer error=\"insufficient_scope\", scope=\"a\"", scopes: ["a"], action: nil),
            Case(status: 403, header: "Bearer error=\"insufficient_scope\"", scopes: ["a"], action: nil),
            Case(status: 401, header: "Bearer error=\"insufficient_user_authentication\", acr_values=\"mfa phr\", max_age=\"0\"",
                 action: .userAuthentication, check: { $0.acrValues == "mfa phr" && $0.maxAge == "0" }),
            Case(status: 401, header: "Bearer error=\"insufficient_user_authentication\", max_age=\"soon\"", action: .userAuthentication,
                 check: { $0.acrValues == nil && $0.maxAge == nil }),
            Case(status: 401, header: "DPoP error=\"use_dpop_nonce\"", dpop: true, nonce: "n1", action: .nonce, check: { $0.nonce == "n1" }),
            Case(status: 401, header: "DPoP error=\"use_dpop_nonce\"", dpop: true, action: nil),
            Case(status: 401, header: "DPoP error=\"use_dpop_nonce\"", nonce: "n1", action: nil),
            // The token's scheme first: a DPoP token heeds the DPoP challenge, a Bearer token the Bearer one.
            Case(status: 401, header: "Bearer error=\"invalid_token\", DPoP error=\"use_dpop_nonce\"", dpop: true, nonce: "n", action: .nonce),
            Case(status: 401, header: "DPoP error=\"use_dpop_nonce\", Bearer error=\"invalid_token\"", action: .newToken),
            Case(status: 401, header: "Basic realm=\"x\", error=\"invalid_token\"", action: nil),
            Case(status: 401, header: "", action: nil),
            Case(status: 401, header: "Bearer error=\"invalid_request\"", action: nil),
        ]
        for c in cases {
            let parsed = Challenge.parse(c.header)
            let d = ChallengeDecision.decide(status: c.status, parsed, sentToken: c.sentToken, scopes: c.scopes, dpop: c.dpop, dpopNonce: c.nonce)
            XCTAssertEqual(d?.action, c.action, "\(c.status) \(c.header): \(String(describing: d))")
            if let d { XCTAssertTrue(c.check(d), "\(c.header): \(d)") }
            XCTAssertNil(ChallengeDecision.decide(status: 200, parsed))
            XCTAssertNil(ChallengeDecision.decide(status: 500, parsed))
        }
    }

    func testTheReasonSaysWhatTheServerAnsweredAndNothingUnprintable() {
        let d = ChallengeDecision.decide(status: 403, Challenge.parse("Bearer error=\"insufficient_scope\", scope=\"admin\", error_description=\"Needs\u{7} admin\""),
                                         scopes: ["admin"])
        XCTAssertEqual(d?.reason, "403 insufficient_scope: \"Needs admin\" (scope \"admin\"), and the token has those scopes already")
        XCTAssertEqual(ChallengeDecision.decide(status: 401, Challenge.parse("Basic realm=x"))?.reason, "401 without a Bearer or DPoP challenge")
        let long = [Challenge(scheme: "bearer", params: ["error": String(repeating: "x", count: 500)])]
        XCTAssertEqual(ChallengeDecision.decide(status: 401, long)?.reason, "401 " + String(repeating: "x", count: 64) + "…")
    }

    // -- What the command wrote --------------------------------------------------------

    func testTheChallengeFileTakesTheValueOrCurlsHeaders() {
        XCTAssertNil(WrittenChallenge.read(""))
        XCTAssertNil(WrittenChallenge.read(" \n\t\r\n"))
        XCTAssertEqual(WrittenChallenge.read("Bearer error=\"invalid_token\"\n"),
                       WrittenChallenge(status: 401, values: ["Bearer error=\"invalid_token\""]))
        XCTAssertEqual(WrittenChallenge.read("WWW-Authenticate: Bearer realm=\"a:b\"\nDPoP algs=ES256"),
                       WrittenChallenge(status: 401, values: ["Bearer realm=\"a:b\"", "DPoP algs=ES256"]))
        // curl -D: every response of the exchange; the last one is the answer.
        let dump = "HTTP/1.1 100 Continue\r\n\r\nHTTP/2 403 \r\ncontent-type: application/json\r\n"
            + "www-authenticate: Bearer error=\"insufficient_scope\", scope=\"files:write\"\r\n"
            + "WWW-Authenticate: DPoP algs=\"ES256\"\r\nDPoP-Nonce: n-1\r\n\r\n"
        XCTAssertEqual(WrittenChallenge.read(dump), WrittenChallenge(
            status: 403, values: ["Bearer error=\"insufficient_scope\", scope=\"files:write\"", "DPoP algs=\"ES256\""], dpopNonce: "n-1"))
        XCTAssertEqual(WrittenChallenge.read("HTTP/1.1 302 Found\nLocation: /x\nWWW-Authenticate: Bearer\n\nHTTP/1.1 401\n"),
                       WrittenChallenge(status: 401, values: []))
        XCTAssertEqual(WrittenChallenge.read("HTTP/1.1\n"), WrittenChallenge(status: 0, values: []))
    }

    // -- authctl exec's one retry --------------------------------------------------------

    static let api = "https://api.example.com"
    static let bearer = TokenGetResult(accessToken: "tok-1", tokenType: "Bearer", expiresAt: 0, scope: "read mail", resource: api,
                                       provider: "corp", account: "alice")
    static let dpopToken = TokenGetResult(accessToken: "tok-1", tokenType: "DPoP", expiresAt: 0, scope: nil, resource: api,
                                          provider: "corp", account: "alice")

    func plan(_ text: String, token: TokenGetResult = bearer, params: TokenGetParams = TokenGetParams(resource: api),
              url: String? = nil) -> (ExecChallenge.Plan, String?) {
        let (plan, reason) = ExecChallenge.plan(WrittenChallenge.read(text), token: token, params: params, url: url)
        return (plan, reason)
    }

    func testNothingWrittenIsTheFreshTokenOfBefore() {
        XCTAssertEqual(plan("").0, .newToken)
        XCTAssertNil(plan("").1)
        XCTAssertEqual(plan("HTTP/1.1 200 OK\n").0, .newToken)  // no refusal after all: the status said so
    }

    func testEachChallengeGetsItsRetry() {
        XCTAssertEqual(plan("Bearer error=\"invalid_token\", error_description=\"revoked\"").0, .newToken)
        XCTAssertEqual(plan("Bearer error=\"invalid_token\"", url: "https://u:p@api.example.com/v1/x?secret=1#f").1,
                       "https://api.example.com/v1/x refused the command's request with 401 invalid_token")
        // The union of the token's scopes (its answer's `scope`, or the --scope asked) and the server's.
        XCTAssertEqual(plan("HTTP/2 403\nwww-authenticate: Bearer error=\"insufficient_scope\", scope=\"files:write read\"\n").0,
                       .moreScopes(["read", "mail", "files:write"]))
        XCTAssertEqual(plan("Bearer error=\"insufficient_scope\", scope=\"b\"", params: TokenGetParams(resource: Self.api, scopes: ["a"])).0,
                       .moreScopes(["a", "b"]))
        XCTAssertEqual(plan("Bearer resource_metadata=\"https://api.example.com/.well-known/oauth-protected-resource\"").0,
                       .discover(resourceMetadata: "https://api.example.com/.well-known/oauth-protected-resource"))
        let dump = "HTTP/1.1 401 Unauthorized\nWWW-Authenticate: DPoP error=\"use_dpop_nonce\"\nDPoP-Nonce: n1\n"
        XCTAssertEqual(plan(dump, token: Self.dpopToken, url: "https://api.example.com/x").0, .nonce("n1"))
    }

    func testAChallengeNoRetryHelpsIsSaidAndNotRetried() {
        XCTAssertEqual(plan("Bearer error=\"insufficient_scope\", scope=\"read\"").0, .stop(
            "the API refused the command's request with 401 insufficient_scope (scope \"read\"), and the token has those scopes already"))
        XCTAssertEqual(plan("HTTP/1.1 403 Forbidden\n\n").0, .stop("the API refused the command's request with 403 without a Bearer or DPoP challenge"))
        XCTAssertEqual(plan("Bearer resource_metadata=\"https://x/m\"", params: TokenGetParams(provider: "corp")).0, .stop(
            "the API refused the command's request with 401 without an error code, and no resource was given to discover"))
        let dump = "HTTP/1.1 401 Unauthorized\nWWW-Authenticate: DPoP error=\"use_dpop_nonce\"\nDPoP-Nonce: n1\n"
        XCTAssertEqual(plan(dump, token: Self.dpopToken).0, .stop("the API refused the command's request with 401 use_dpop_nonce, "
            + "and authctl exec makes a DPoP proof only for the request --url names"))
        XCTAssertEqual(plan("DPoP error=\"use_dpop_nonce\"", token: Self.dpopToken, url: "https://api.example.com/x").0,
                       .stop("https://api.example.com/x refused the command's request with 401 use_dpop_nonce, and no DPoP-Nonce header"))
        for garbage in ["Bearer error=\"unterminated", "\"", "Basic realm=x", "Bearer =,=,=", "\\\\\\", "\u{0}\u{1b}[31m"] {
            guard case .stop(let sentence) = plan(garbage).0 else { return XCTFail(garbage) }
            XCTAssertTrue(sentence.hasPrefix("the API refused the command's request with 401"), sentence)
            XCTAssertFalse(sentence.contains("\u{1b}"))
        }
    }

    func testInsufficientUserAuthenticationSaysWhichSignInToRun() {
        let text = "Bearer error=\"insufficient_user_authentication\", error_description=\"A different authentication level is required\", "
            + "acr_values=\"myACR\", max_age=\"5\""
        XCTAssertEqual(plan(text).0, .signIn(
            "the API refused the command's request with 401 insufficient_user_authentication: \"A different authentication level is "
            + "required\" (acr_values \"myACR\", max_age \"5\"): it asks for a new sign-in with acr_values=myACR and max_age=5 (RFC 9470), "
            + "which authbrokerd does not ask the provider for on a program's behalf: run "
            + "`authctl login --resource https://api.example.com --param acr_values=myACR --param max_age=5`, then try again"))
        guard case .signIn(let quoted) = plan("Bearer error=\"insufficient_user_authentication\", acr_values=\"a b\"",
                                              params: TokenGetParams(provider: "corp")).0 else { return XCTFail() }
        XCTAssertTrue(quoted.contains("run `authctl login --provider corp --param 'acr_values=a b'`"), quoted)
    }

    func testTheSentenceOfARetryRefusedToo() {
        XCTAssertEqual(ExecChallenge.refusedAgain(WrittenChallenge.read("Bearer error=\"invalid_token\", error_description=\"revoked\""),
                                                  status: 77, after: .newToken, url: "https://api.example.com/v1?x=1", dpop: false),
                       "https://api.example.com/v1 refused the command's request again with 401 invalid_token: \"revoked\", after a fresh token")
        XCTAssertEqual(ExecChallenge.refusedAgain(nil, status: 77, after: .moreScopes(["a"]), url: nil, dpop: false),
                       "the command exited 77 again, after a token for more scopes")
        XCTAssertEqual(ExecChallenge.refusedAgain(WrittenChallenge.read("HTTP/1.1 403\n"), status: 3, after: .discover(resourceMetadata: nil),
                                                  url: nil, dpop: false),
                       "the API refused the command's request again with 403 without a Bearer or DPoP challenge, after a token from "
                       + "the authorization server its metadata names")
    }

    func testTheSubjectHasNoSecretsOfTheURL() {
        XCTAssertEqual(ExecChallenge.subject(nil), "the API")
        XCTAssertEqual(ExecChallenge.subject("not a url"), "the API")
        XCTAssertEqual(ExecChallenge.subject("https://user:pw@api.example.com:8443/a/b?token=x#frag"), "https://api.example.com:8443/a/b")
        XCTAssertEqual(ExecChallenge.subject("https://api.example.com?x"), "https://api.example.com")
        XCTAssertEqual(ExecChallenge.shellJoin(["a", "", "it's", "x=y/z"]), "a '' 'it'\"'\"'s' x=y/z")
    }
}
