@testable import authctl
import ArgumentParser
import XCTest

/// What `setup-aws` does to ~/.aws/config (one profile's credential settings replaced, the
/// rest of the file as it was) and what `setup-gcloud` writes. boto3 and google-auth
/// reading them are test_clouds.py.
final class CloudSetupTests: XCTestCase {
    func testAProfileIsAddedAfterTheOthers() {
        var file = AWSConfigFile(text: "[default]\nregion = eu-west-1\n")
        XCTAssertEqual(file.set(profile: "dev", [("credential_process", "/usr/bin/authctl aws-credentials --role-arn A")]), [])
        XCTAssertEqual(file.text, "[default]\nregion = eu-west-1\n\n[profile dev]\ncredential_process = /usr/bin/authctl aws-credentials --role-arn A\n")
    }

    func testOnlyTheProfilesCredentialSettingsAreReplaced() {
        var file = AWSConfigFile(text: """
            # my settings
            [profile dev]
            output = json
            sso_session = corp
            sso_account_id = 123456789012
            credential_process = old
            s3 =
              max_concurrent_requests = 20
            region = us-east-1

            # the next one
            [profile prod]
            role_arn = arn:aws:iam::1:role/x
            """)
        let removed = file.set(profile: "dev", [("credential_process", "new"), ("region", "eu-west-1")])
        XCTAssertEqual(removed, ["sso_session", "sso_account_id"])
        XCTAssertEqual(file.text, """
            # my settings
            [profile dev]
            output = json
            s3 =
              max_concurrent_requests = 20
            credential_process = new
            region = eu-west-1

            # the next one
            [profile prod]
            role_arn = arn:aws:iam::1:role/x

            """)
        var again = file
        again.set(profile: "dev", [("credential_process", "new"), ("region", "eu-west-1")])
        XCTAssertEqual(again.text, file.text, "running it again changes nothing")
    }

    func testTheDefaultProfileIsItsOwnSection() {
        var file = AWSConfigFile(text: "")
        file.set(profile: "default", [("credential_process", "x")])
        XCTAssertEqual(file.text, "[default]\ncredential_process = x\n")
        XCTAssertTrue(AWSConfigFile(text: "[dev]\naws_access_key_id = AKIA\n").hasCredentials(profile: "dev"))
        XCTAssertFalse(AWSConfigFile(text: "[other]\naws_access_key_id = AKIA\n").hasCredentials(profile: "dev"))
    }

    func testTheProfileRunsAWSCredentialsWithTheOptionsGiven() throws {
        let options = try AWSRoleOptions.parse(["--role-arn", "arn:aws:iam::123456789012:role/dev", "--provider", "corp",
                                               "--session-policy", #"{"Version":"2012-10-17"}"#, "--duration", "900"])
        XCTAssertEqual(GitHelperSetup.shellLine(["/usr/bin/authctl"] + options.arguments()),
                       #"/usr/bin/authctl aws-credentials --role-arn arn:aws:iam::123456789012:role/dev --provider corp --session-policy '{"Version":"2012-10-17"}' --duration 900"#)
        XCTAssertThrowsError(try AWSRoleOptions.parse(["--role-arn", "dev"]))
        XCTAssertThrowsError(try AWSRoleOptions.parse(["--role-arn", "arn:aws:iam::1:role/x", "--audience", "a", "--id-token"]))
    }

    func testTheGoogleConfigurationNamesTheExecutableAndNoToken() throws {
        let setup = try SetupGcloud.parse(["--audience", "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/i",
                                           "--provider", "corp", "--timeout-millis", "20000"])
        let config = setup.configurationFile()
        XCTAssertEqual(config.type, "external_account")
        XCTAssertEqual(config.subjectTokenType, "urn:ietf:params:oauth:token-type:id_token")
        XCTAssertEqual(config.tokenURL, "https://sts.googleapis.com/v1/token")
        XCTAssertTrue(config.credentialSource.executable.command.hasSuffix(" gcloud-credential --provider corp --timeout 15"),
                      "its own wait ends before the library's timeout")
        XCTAssertEqual(config.credentialSource.executable.timeoutMillis, 20000)
        let jwt = try SetupGcloud.parse(["--audience", "//x", "--resource", "https://api"]).configurationFile()
        XCTAssertEqual(jwt.subjectTokenType, "urn:ietf:params:oauth:token-type:jwt")
        XCTAssertThrowsError(try SetupGcloud.parse(["--audience", "//x", "--token-url", "http://sts.example.com/v1/token"]))
    }
}
