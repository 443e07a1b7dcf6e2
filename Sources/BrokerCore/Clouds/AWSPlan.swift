import BrokerProtocol
import OAuth

/// What an `aws.credentials` request asks STS for, with `[aws]`'s defaults filled in and
/// every value checked before anything is sent: the cache key of its credentials.
enum AWSPlan {
    /// The audience whose access token is sent, or nil for the ID token: the request's
    /// `audience`, else `[aws] audience`, unless `id_token` asks for the ID token.
    static func audience(_ p: AWSCredentialsParams, settings: AWSSettings) throws(BrokerError) -> String? {
        if p.idToken == true {
            guard p.audience == nil else {
                throw BrokerError.invalidRequest(message: "give either audience (send its access token) or id_token (send the ID token), not both")
            }
            return nil
        }
        if let audience = p.audience {
            guard !audience.isEmpty, audience.utf8.count <= 2048 else {
                throw BrokerError.invalidRequest(message: "audience must be 1 to 2048 bytes: a resource of the provider whose access token STS is to check")
            }
            return audience
        }
        return settings.audience
    }

    static func key(_ p: AWSCredentialsParams, account: Account, audience: String?,
                    settings: AWSSettings) throws(BrokerError) -> AWSCredentialKey {
        guard let role = p.roleARN, isRoleARN(role) else {
            throw BrokerError.invalidRequest(message: "role_arn must be the ARN of the IAM role to assume, arn:aws:iam::ACCOUNT:role/NAME (--role-arn)")
        }
        let duration = p.durationSeconds ?? settings.durationSeconds
        let range = AWSSettings.durationRange
        guard range.contains(duration) else {
            throw BrokerError.invalidRequest(message: "duration_seconds must be between \(range.lowerBound) and \(range.upperBound) (--duration; STS also holds it to the role's maximum session duration)")
        }
        if let region = p.region, !AWSSettings.isRegion(region) {
            throw BrokerError.invalidRequest(message: "region must be an AWS region name such as eu-west-1 (--region)")
        }
        // An endpoint named anywhere (a VPC endpoint, a proxy) before a region's.
        let endpoint = p.stsEndpoint ?? settings.stsEndpoint
            ?? (p.region ?? settings.region).map(AWSSettings.regionalEndpoint) ?? AWSSettings.globalEndpoint
        do throws(OAuthError) {
            try EndpointPolicy.check(endpoint, what: "the STS endpoint")
        } catch {
            throw BrokerError.invalidRequest(message: "\(error.message) (--sts-endpoint or [aws] sts_endpoint)")
        }
        let sessionName = p.roleSessionName ?? settings.roleSessionName ?? AWSSettings.sessionName(from: account.displayName)
        guard AWSSettings.isSessionName(sessionName) else {
            throw BrokerError.invalidRequest(message: "role_session_name must be 2 to 64 letters, digits or +=,.@_- (what STS takes as RoleSessionName)")
        }
        if let policy = p.sessionPolicy {
            guard !policy.isEmpty, policy.count <= 2048 else {
                throw BrokerError.invalidRequest(message: "session_policy must be IAM policy JSON of 1 to 2048 characters (--session-policy), or left out")
            }
        }
        let request = AssumeRoleRequest(endpoint: endpoint, roleARN: role, sessionName: sessionName,
                                        durationSeconds: duration, policy: p.sessionPolicy)
        return AWSCredentialKey(account: account.key, request: request, audience: audience)
    }

    /// `arn:PARTITION:iam::ACCOUNT:role/PATH/NAME`, within STS's 2048 bytes.
    static func isRoleARN(_ arn: String) -> Bool {
        let parts = arn.split(separator: ":", maxSplits: 5, omittingEmptySubsequences: false)
        guard arn.utf8.count <= 2048, parts.count == 6, parts[0] == "arn", parts[1].hasPrefix("aws"), parts[2] == "iam",
              parts[3].isEmpty, parts[4].utf8.count == 12, parts[4].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              parts[5].hasPrefix("role/"), parts[5].count > 5
        else { return false }
        return arn.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }
}
