@testable import BrokerCore
import Testing

/// `[aws]` in config.toml: a setting out of its bounds, or one the table does not know, is
/// refused before the daemon starts, saying why.
@Suite struct AWSSettingRefusalTests {
    @Test(arguments: [
        (#"sts_endpoint = "http://sts.example.com""#, "must use https"),
        ("duration = 60", "between 900 and 43200"),
        (#"profile = "dev""#, "unknown key"),
        (#"role_session_name = "a b""#, "RoleSessionName"),
    ])
    func anAWSSettingOutOfItsBoundsIsRefusedSayingWhy(setting: String, problem: String) {
        let error = #expect(throws: ConfigError.self) {
            try BrokerHarness.config(extraConfig: "[aws]\n" + setting)
        }
        #expect(error?.description.contains(problem) == true, "\(setting): \(String(describing: error))")
    }
}
