import OAuth
import TOML

/// `[aws]`: how `aws.credentials` asks STS (docs/configuration.md, "AWS"). Each key is the
/// default of the request's member of the same name.
public struct AWSSettings: Sendable, Equatable {
    /// The STS endpoint; nil: the region's (`https://sts.REGION.amazonaws.com`), else the
    /// global `https://sts.amazonaws.com`.
    public var stsEndpoint: String?
    public var region: String?
    /// Seconds the credentials live (STS's `DurationSeconds`).
    public var durationSeconds: Int = 3600
    /// STS's `RoleSessionName`; nil: the account's name, made fit for it.
    public var roleSessionName: String?
    /// Send the access token for this audience (a resource of the provider) instead of
    /// the ID token.
    public var audience: String?

    public init() {}

    /// What STS takes as `DurationSeconds`: 15 minutes to 12 hours (the role's own
    /// maximum, one hour unless its administrator raised it, is STS's to check).
    public static let durationRange = 900...43_200
}

extension AWSSettings {
    /// The STS endpoint of a region: `https://sts.REGION.amazonaws.com`, `.com.cn` in China.
    static func regionalEndpoint(_ region: String) -> String {
        "https://sts.\(region).amazonaws.com\(region.hasPrefix("cn-") ? ".cn" : "")"
    }

    /// The global endpoint, when neither an endpoint nor a region is named.
    static let globalEndpoint = "https://sts.amazonaws.com"

    /// Whether `region` looks like an AWS region name (`eu-west-1`, `us-gov-west-1`).
    static func isRegion(_ region: String) -> Bool {
        (2...32).contains(region.utf8.count) && region.contains("-")
            && region.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") }
    }

    /// Whether `name` may be STS's `RoleSessionName`: 2 to 64 of `[A-Za-z0-9+=,.@_-]`.
    static func isSessionName(_ name: String) -> Bool {
        (2...64).contains(name.utf8.count) && name.utf8.allSatisfy(sessionNameByte)
    }

    static func sessionNameByte(_ b: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || "+=,.@_-".utf8.contains(b)
    }

    /// A session name made from an account's name: other bytes become `-`, cut to 64, and
    /// `authbroker-` before one shorter than 2.
    static func sessionName(from accountName: String) -> String {
        var bytes = accountName.utf8.map { sessionNameByte($0) ? $0 : UInt8(ascii: "-") }
        if bytes.count > 64 { bytes = Array(bytes.prefix(64)) }
        let name = String(decoding: bytes, as: UTF8.self)
        return name.utf8.count >= 2 ? name : "authbroker-" + name
    }
}

extension TableReader {
    /// `[aws]`, checked key by key.
    func aws(_ root: TOMLTable) throws(ConfigError) -> AWSSettings {
        var settings = AWSSettings()
        guard let table = try table(root, "aws", at: nil) else { return settings }
        try checkKeys(table, allowed: ["sts_endpoint", "region", "duration", "role_session_name", "audience"], at: "aws")
        if let url = try string(table, "sts_endpoint", at: "aws") {
            do throws(OAuthError) {
                try EndpointPolicy.check(url, what: "sts_endpoint")
            } catch {
                throw fail("aws.sts_endpoint", error.message)
            }
            settings.stsEndpoint = url
        }
        if let region = try string(table, "region", at: "aws") {
            guard AWSSettings.isRegion(region) else {
                throw fail("aws.region", "must be an AWS region name such as \"eu-west-1\", not \"\(region)\"")
            }
            settings.region = region
        }
        let range = AWSSettings.durationRange
        if let v = try int(table, "duration", at: "aws", range: range) { settings.durationSeconds = v }
        if let name = try string(table, "role_session_name", at: "aws") {
            guard AWSSettings.isSessionName(name) else {
                throw fail("aws.role_session_name", "must be 2 to 64 letters, digits or +=,.@_- (what STS takes as RoleSessionName)")
            }
            settings.roleSessionName = name
        }
        if let audience = try string(table, "audience", at: "aws") {
            guard !audience.isEmpty else { throw fail("aws.audience", "must not be empty: leave it out to send the ID token") }
            settings.audience = audience
        }
        return settings
    }
}
