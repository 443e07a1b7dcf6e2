@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import Synchronization
import XCTest

/// `aws.credentials` against a STUB STS (`StubSTS`) for what moto's server never does:
/// its refusals, throttling, an answer that is not STS's, a moved clock for the cache's
/// margin, and concurrent first callers. boto3 against moto is test_clouds.py.
final class AWSCredentialsTests: XCTestCase {
    private let role = "arn:aws:iam::123456789012:role/dev"
    private let account = AccountKey(provider: "corp", subject: "sub-alice")

    /// A broker over the STUB STS and provider, alice's ID token in place (no provider
    /// request needed for it), `[aws]` as given.
    private func harness(aws: String = "") async throws -> (BrokerHarness, StubSTS, String) {
        let made = Mutex<StubSTS?>(nil)
        let h = try await BrokerHarness(extraConfig: aws.isEmpty ? "" : "[aws]\n" + aws, provider: { clock in
            let sts = StubSTS(provider: StubTransport(), clock: clock)
            made.withLock { $0 = sts }
            return sts
        })
        let sts = try XCTUnwrap(made.withLock { $0 })
        let now = Int(h.clock.now)
        let claims = #"{"iss":"\#(StubTransport.issuer)","aud":"authbroker","sub":"sub-alice","iat":\#(now),"exp":\#(now + 7200)}"#
        let idToken = Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
        h.broker.accounts.update(account) { $0.idToken = idToken }
        return (h, sts, idToken)
    }

    private func credentials(_ h: BrokerHarness, _ params: AWSCredentialsParams) async throws(BrokerError) -> AWSCredentialsResult {
        if let hit = h.broker.clouds.cachedAWSCredentials(params) { return hit }
        return try await h.broker.clouds.awsCredentials(params)
    }

    private func refusal(_ h: BrokerHarness, _ params: AWSCredentialsParams) async -> BrokerError? {
        do {
            let got = try await credentials(h, params)
            XCTFail("expected a refusal, got credentials \(fingerprint(got.accessKeyID))")
            return nil
        } catch {
            return error
        }
    }

    func testTheIDTokenIsSentOnceAndTheCredentialsServedFromMemoryUntilShortlyBeforeTheyExpire() async throws {
        let (h, sts, idToken) = try await harness()
        let first = try await credentials(h, AWSCredentialsParams(roleARN: role))
        XCTAssertFalse(first.cached)
        XCTAssertEqual(first.accessKeyID, "ASIASTUB1")
        XCTAssertEqual(first.sessionToken, "stub-session-1&more", "entities are read")
        XCTAssertEqual(first.expiresAt, Int64(h.clock.now) + 3600)
        XCTAssertEqual(first.assumedRoleARN, "arn:aws:sts::123456789012:assumed-role/dev/alice")
        let form = try XCTUnwrap(sts.forms.first)
        XCTAssertEqual(form["Action"], "AssumeRoleWithWebIdentity")
        XCTAssertEqual(form["Version"], "2011-06-15")
        XCTAssertEqual(form["RoleArn"], role)
        XCTAssertEqual(form["RoleSessionName"], "alice", "the account's name")
        XCTAssertEqual(form["DurationSeconds"], "3600")
        XCTAssertEqual(form["WebIdentityToken"].map(fingerprint), fingerprint(idToken))
        XCTAssertNil(form["Policy"])

        let again = try XCTUnwrap(h.broker.clouds.cachedAWSCredentials(AWSCredentialsParams(roleARN: role)), "a cache hit, without waiting")
        XCTAssertTrue(again.cached)
        XCTAssertEqual(again.accessKeyID, first.accessKeyID)
        h.clock.advance(2700)  // 900 s left: botocore would ask again on every call from here
        XCTAssertNil(h.broker.clouds.cachedAWSCredentials(AWSCredentialsParams(roleARN: role)))
        let renewed = try await credentials(h, AWSCredentialsParams(roleARN: role))
        XCTAssertEqual(renewed.accessKeyID, "ASIASTUB2")
        XCTAssertEqual(sts.forms.count, 2)
    }

    func testEachRolePolicyAndDurationHasItsOwnCredentials() async throws {
        let (h, sts, _) = try await harness()
        let policy = #"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role))
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role, sessionPolicy: policy))
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role, durationSeconds: 900))
        _ = try await credentials(h, AWSCredentialsParams(roleARN: "arn:aws:iam::123456789012:role/other"))
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role, sessionPolicy: policy))
        XCTAssertEqual(sts.forms.count, 4)
        XCTAssertEqual(sts.forms[1]["Policy"], policy, "the policy is sent as it is, percent-encoded on the way")
        XCTAssertEqual(sts.forms[2]["DurationSeconds"], "900")
    }

    func testConcurrentFirstCallersShareOneRequest() async throws {
        let (h, sts, _) = try await harness()
        sts.slow(.milliseconds(200))
        let clouds = h.broker.clouds
        let role = role
        let keys = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await clouds.awsCredentials(AWSCredentialsParams(roleARN: role)).accessKeyID } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        XCTAssertEqual(Set(keys), ["ASIASTUB1"])
        XCTAssertEqual(sts.forms.count, 1)
    }

    func testAnAudienceSendsItsAccessTokenInstead() async throws {
        let (h, sts, _) = try await harness(aws: #"audience = "https://api""#)
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role))
        XCTAssertEqual(sts.forms.first?["WebIdentityToken"], "access-1", "the access token for [aws] audience")
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role, idToken: true))
        XCTAssertNotEqual(sts.forms.last?["WebIdentityToken"], "access-2")
        XCTAssertTrue(sts.forms.last?["WebIdentityToken"]?.hasSuffix(".c2ln") == true, "id_token sends the ID token")
        XCTAssertEqual(sts.provider.tokenRequests.last?["resource"], "https%3A%2F%2Fapi")
        let outside = await refusal(h, AWSCredentialsParams(roleARN: role, audience: "https://elsewhere"))
        XCTAssertTrue(outside?.message.contains("resources of [providers.corp]") == true, outside?.message ?? "")
    }

    func testTheEndpointAndSessionNameComeFromTheRequestThenAWSSettings() async throws {
        let (h, sts, _) = try await harness(aws: """
            region = "eu-west-1"
            role_session_name = "ci-runner"
            duration = 7200
            """)
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role))
        XCTAssertEqual(sts.forms.last?["RoleSessionName"], "ci-runner")
        XCTAssertEqual(sts.forms.last?["DurationSeconds"], "7200")
        let key = try AWSPlan.key(AWSCredentialsParams(roleARN: role), account: XCTUnwrap(h.broker.accounts[account]), audience: nil,
                                  settings: h.broker.config.aws)
        XCTAssertEqual(key.request.endpoint, "https://sts.eu-west-1.amazonaws.com")
        let china = try AWSPlan.key(AWSCredentialsParams(roleARN: role, region: "cn-north-1"), account: XCTUnwrap(h.broker.accounts[account]),
                                    audience: nil, settings: AWSSettings())
        XCTAssertEqual(china.request.endpoint, "https://sts.cn-north-1.amazonaws.com.cn")
        XCTAssertEqual(AWSSettings.sessionName(from: "Alice Smith <alice@corp>"), "Alice-Smith--alice@corp-")
        XCTAssertEqual(AWSSettings.sessionName(from: "a"), "authbroker-a")
    }

    func testEachRefusalIsOneSentenceWithTheCodeAndTheNextStep() async throws {
        let (h, sts, idToken) = try await harness()
        let cases: [(String, Int, String)] = [
            ("AccessDenied", 403, #"the role's trust policy must allow sts:AssumeRoleWithWebIdentity to the Federated principal of the IAM OIDC provider for https://idp.example, with the conditions idp.example:aud = "authbroker" and idp.example:sub = "sub-alice""#),
            ("InvalidIdentityToken", 400, #"check that the role's AWS account has that provider, with "authbroker" among its audiences (client IDs)"#),
            ("IDPRejectedClaim", 403, "or send an access token for the audience it lists (--audience)"),
            ("ExpiredTokenException", 400, "check this host's clock"),
            ("MalformedPolicyDocument", 400, "fix the session policy (--session-policy"),
            ("ValidationError", 400, "check --role-arn"),
            ("RegionDisabledException", 403, "activate STS in that region"),
            ("SomethingNew", 400, "check the role arn:aws:iam::123456789012:role/dev and its trust policy"),
        ]
        for (code, status, next) in cases {
            sts.script(.error(code: code, message: "STS said &lt;so&gt; &amp; more.", status: status))
            let error = await refusal(h, AWSCredentialsParams(roleARN: role))
            guard case .providerError(let provider, let oauthError, let message)? = error else {
                XCTFail("\(code): \(String(describing: error))")
                continue
            }
            XCTAssertEqual(provider, "corp")
            XCTAssertEqual(oauthError, code)
            XCTAssertTrue(message.hasPrefix("AWS STS refused to let alice assume \(role) (\(code): STS said <so> & more): "), message)
            XCTAssertTrue(message.contains(next), "\(code): \(message)")
            XCTAssertFalse(message.contains("\n") || message.contains(idToken), message)
        }
        XCTAssertEqual(h.broker.clouds.cachedAWSCredentials(AWSCredentialsParams(roleARN: role)), nil, "a refusal is not kept")
    }

    func testThrottlingAndAnAnswerThatIsNotSTSsSayToTryAgain() async throws {
        let (h, sts, _) = try await harness()
        sts.script(.error(code: "Throttling", message: "Rate exceeded", status: 400),
                   .error(code: "IDPCommunicationError", message: "could not reach", status: 400),
                   .raw(status: 502, body: "<html>bad gateway</html>"))
        for expected in ["AWS STS is busy (Throttling)", "AWS could not reach https://idp.example to check the ID token",
                         "answered HTTP 502 with something that is not an STS answer"] {
            let error = await refusal(h, AWSCredentialsParams(roleARN: role))
            guard case .providerUnreachable(_, let retry, let message)? = error else { XCTFail(String(describing: error)); continue }
            XCTAssertEqual(retry, 5)
            XCTAssertTrue(message.contains(expected), message)
        }
        let ok = try await credentials(h, AWSCredentialsParams(roleARN: role))
        XCTAssertEqual(ok.accessKeyID, "ASIASTUB4")
    }

    func testRequestsThatCannotBeRightAreRefusedBeforeSTSIsAsked() async throws {
        let (h, sts, _) = try await harness()
        let bad: [(AWSCredentialsParams, String)] = [
            (AWSCredentialsParams(), "role_arn must be the ARN of the IAM role to assume"),
            (AWSCredentialsParams(roleARN: "arn:aws:iam::12345:role/dev"), "role_arn must be the ARN"),
            (AWSCredentialsParams(roleARN: role, durationSeconds: 60), "duration_seconds must be between 900 and 43200"),
            (AWSCredentialsParams(roleARN: role, stsEndpoint: "http://sts.example.com"), "must use https (http is allowed only on a loopback host)"),
            (AWSCredentialsParams(roleARN: role, region: "EU West"), "region must be an AWS region name"),
            (AWSCredentialsParams(roleARN: role, audience: "https://api", idToken: true), "not both"),
            (AWSCredentialsParams(roleARN: role, roleSessionName: "a b"), "role_session_name must be 2 to 64"),
            (AWSCredentialsParams(roleARN: role, sessionPolicy: String(repeating: "x", count: 2049)), "session_policy must be"),
        ]
        for (params, sentence) in bad {
            let error = await refusal(h, params)
            XCTAssertTrue(error?.message.contains(sentence) == true, "\(sentence): \(error?.message ?? "none")")
        }
        XCTAssertEqual(sts.forms.count, 0)
    }

    func testNoCredentialOrTokenIsLogged() async throws {
        let (h, sts, idToken) = try await harness()
        let got = try await credentials(h, AWSCredentialsParams(roleARN: role))
        sts.script(.error(code: "AccessDenied", message: "no", status: 403))
        _ = await refusal(h, AWSCredentialsParams(roleARN: "arn:aws:iam::123456789012:role/other"))
        let log = h.logs.all.joined(separator: "\n")
        for secret in [got.secretAccessKey, got.sessionToken, idToken] { XCTAssertFalse(log.contains(secret)) }
    }

    func testASignedOutAccountIsServedNothing() async throws {
        let (h, _, _) = try await harness()
        _ = try await credentials(h, AWSCredentialsParams(roleARN: role))
        h.broker.accounts.remove(account)
        XCTAssertNil(h.broker.clouds.cachedAWSCredentials(AWSCredentialsParams(roleARN: role)))
        let error = await refusal(h, AWSCredentialsParams(roleARN: role))
        XCTAssertTrue(error?.message.contains("authctl login --provider corp") == true, error?.message ?? "")
    }

    func testTheIDTokenMethodServesTheStoredTokenAndItsExpiry() async throws {
        let (h, _, idToken) = try await harness()
        let hit = try XCTUnwrap(h.broker.clouds.cachedIDToken(IDTokenParams()))
        XCTAssertEqual(fingerprint(hit.idToken), fingerprint(idToken))
        XCTAssertEqual(hit.expiresAt, Int64(h.clock.now) + 7200)
        XCTAssertNil(h.broker.clouds.cachedIDToken(IDTokenParams(minTTL: 7200)), "not enough life left: renewed on the slow path")
    }
}

final class STSAnswerReadingTests: XCTestCase {
    func testTheReaderTakesEntitiesCDATAAndPrefixesAndRefusesWhatItCannotRead() throws {
        let xml = try XCTUnwrap(STSXML(Array(#"<?xml version="1.0"?><!-- c --><a:R xmlns:a="x"><B k="v">1 &lt;&#65;&#x42;&gt;</B><C><![CDATA[<raw>]]></C><D/></a:R>"#.utf8)))
        XCTAssertEqual(xml.root, "R")
        XCTAssertEqual(xml["R/B"], "1 <AB>")
        XCTAssertEqual(xml["R/C"], "<raw>")
        XCTAssertEqual(xml["R/D"], "")
        for bad in ["<a><b></a>", "<a>", #"<!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>"#, "<a>&unknown;</a>", "<a/><b/>", "text"] {
            XCTAssertNil(STSXML(Array(bad.utf8)), bad)
        }
    }

    func testExpirationTimesAreRead() {
        XCTAssertEqual(ISO8601Time.unixSeconds("2026-12-02T00:08:31.791636Z"), 1_796_170_111)
        XCTAssertEqual(ISO8601Time.unixSeconds("1970-01-01T00:00:00Z"), 0)
        XCTAssertEqual(ISO8601Time.unixSeconds("2024-02-29T12:00:00+02:00"), 1_709_200_800)
        for bad in ["2024-13-01T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "yesterday"] {
            XCTAssertNil(ISO8601Time.unixSeconds(bad), bad)
        }
    }

    func testAWSSettingsAreReadFromConfigToml() throws {
        let config = try BrokerHarness.config(extraConfig: """
            [aws]
            sts_endpoint = "https://sts.eu-central-1.amazonaws.com"
            region = "eu-central-1"
            duration = 1800
            role_session_name = "dev@corp"
            audience = "https://api"
            """)
        XCTAssertEqual(config.aws.stsEndpoint, "https://sts.eu-central-1.amazonaws.com")
        XCTAssertEqual(config.aws.durationSeconds, 1800)
        XCTAssertEqual(config.aws.roleSessionName, "dev@corp")
        XCTAssertEqual(config.aws.audience, "https://api")
        // A setting out of its bounds: AWSSettingRefusalTests.
    }
}
