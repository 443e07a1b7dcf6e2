import OAuth

/// The sentence a user reads when STS refuses `AssumeRoleWithWebIdentity`: the AWS error
/// code, what STS said, and the next step, naming what the other side checks (the role's
/// trust policy and its `aud` and `sub` conditions, the IAM OIDC provider's audiences).
struct AWSRefusal {
    var provider: String
    var accountName: String
    var subject: String
    var issuer: String
    /// What the token's `aud` is: the client id (an ID token) or the audience asked for.
    var audience: String
    /// Whether the token sent was the ID token (else an access token for `audience`).
    var sentIDToken: Bool
    var roleARN: String
    var endpoint: String

    /// The issuer as IAM names it in condition keys: without `https://`.
    private var issuerKey: String {
        issuer.hasPrefix("https://") ? String(issuer.dropFirst(8)) : issuer
    }

    private var token: String { sentIDToken ? "the ID token" : "the access token for \(audience)" }

    /// The trust policy's conditions that must hold for this token.
    private var conditions: String {
        "\(issuerKey):aud = \"\(audience)\" and \(issuerKey):sub = \"\(subject)\""
    }

    func error(_ refusal: AWSSTS.Refusal) -> BrokerError {
        let said = refusal.message.isEmpty ? refusal.code : "\(refusal.code): \(refusal.message)"
        let head = "AWS STS refused to let \(accountName) assume \(roleARN) (\(said))"
        let next: String
        switch refusal.code {
        case "AccessDenied":
            next = "the role's trust policy must allow sts:AssumeRoleWithWebIdentity to the Federated principal of the IAM OIDC provider for \(issuer), with the conditions \(conditions); change the trust policy, or choose a role that trusts this account"
        case "InvalidIdentityToken":
            next = "STS could not validate \(token) against the IAM OIDC provider for \(issuer): check that the role's AWS account has that provider, with \"\(audience)\" among its audiences (client IDs), and that AWS can read the issuer's discovery document and keys over https"
        case "IDPRejectedClaim":
            next = "the IAM OIDC provider for \(issuer) rejected a claim of \(token): check that its audiences (client IDs) list \"\(audience)\"" + (sentIDToken ? ", or send an access token for the audience it lists (--audience)" : "")
        case "ExpiredTokenException":
            next = "\(token) had expired by AWS's clock, though authbroker sends only tokens that are still valid by this host's: check this host's clock, then try again (`authctl login --provider \(provider)` gets a new one)"
        case "MalformedPolicyDocument", "PackedPolicyTooLarge":
            next = "fix the session policy (--session-policy, IAM policy JSON of at most 2048 characters), or leave it out"
        case "RegionDisabledException":
            next = "activate STS in that region (IAM console, Account settings), or use another region (--region or [aws] region)"
        case "ValidationError", "InvalidParameterValue", "InvalidParameterCombination":
            next = "check --role-arn (arn:aws:iam::ACCOUNT:role/NAME), --duration (900 s to the role's maximum session duration, 1 h unless raised) and the role session name ([aws] role_session_name)"
        default:
            next = "check the role \(roleARN) and its trust policy (the conditions \(conditions)), and the STS endpoint \(EndpointPolicy.describe(endpoint))"
        }
        return .providerError(provider: provider, oauthError: refusal.code, message: "\(head): \(next)")
    }

    /// Whether STS asks to be tried again later rather than refusing.
    static func isBusy(_ refusal: AWSSTS.Refusal) -> Bool {
        ["Throttling", "ThrottlingException", "IDPCommunicationError", "ServiceUnavailable", "InternalFailure", "RequestLimitExceeded"]
            .contains(refusal.code) || refusal.status >= 500
    }

    func busy(_ refusal: AWSSTS.Refusal) -> BrokerError {
        let why = refusal.code == "IDPCommunicationError"
            ? "AWS could not reach \(issuer) to check \(token)" : "AWS STS is busy (\(refusal.code))"
        return .providerUnreachable(provider: provider, retryAfter: 5,
                                    message: "\(why), so no credentials for \(roleARN) were minted: try again in a few seconds")
    }
}
