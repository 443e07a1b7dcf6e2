import OAuth

/// Temporary AWS credentials, in memory only: never logged, never written to a file.
struct AWSCredentials: Sendable {
    var accessKeyID: String
    var secretAccessKey: String
    var sessionToken: String
    /// Unix seconds: STS's `Expiration`.
    var expiresAt: Int64
    var assumedRoleARN: String?
}

/// What one `AssumeRoleWithWebIdentity` asks of STS, but the token.
struct AssumeRoleRequest: Hashable, Sendable {
    var endpoint: String
    var roleARN: String
    var sessionName: String
    var durationSeconds: Int
    var policy: String?
}

/// STS's `AssumeRoleWithWebIdentity` over the daemon's HTTP transport: an unsigned form
/// POST (Query API, version 2011-06-15) whose answer is XML.
enum AWSSTS {
    /// An error answer: the AWS error code (`AccessDenied`, `InvalidIdentityToken`…), its
    /// message, and the HTTP status.
    struct Refusal: Error, Equatable {
        var code: String
        var message: String
        var status: Int
    }

    static func httpRequest(_ r: AssumeRoleRequest, webIdentityToken: String) -> HTTPRequest {
        var pairs = [("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", r.roleARN),
                     ("RoleSessionName", r.sessionName), ("DurationSeconds", String(r.durationSeconds))]
        if let policy = r.policy { pairs.append(("Policy", policy)) }
        pairs.append(("WebIdentityToken", webIdentityToken))
        let body = pairs.map { FormEncoding.escape($0.0) + "=" + FormEncoding.escape($0.1) }.joined(separator: "&")
        return HTTPRequest(method: "POST", url: r.endpoint,
                           headers: ["Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "Accept": "text/xml"],
                           body: Array(body.utf8))
    }

    private static let result = "AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/"

    /// The credentials of a 200 answer, the refusal of an error answer, or nil for an
    /// answer that is neither (not STS's).
    static func read(_ response: HTTPResponse) -> Result<AWSCredentials, Refusal>? {
        guard let xml = STSXML(response.body) else { return nil }
        if response.status == 200, xml.root == "AssumeRoleWithWebIdentityResponse" {
            let c = result + "Credentials/"
            guard let id = xml[c + "AccessKeyId"], !id.isEmpty, let secret = xml[c + "SecretAccessKey"], !secret.isEmpty,
                  let session = xml[c + "SessionToken"], !session.isEmpty,
                  let expiration = xml[c + "Expiration"].flatMap(ISO8601Time.unixSeconds)
            else { return nil }
            return .success(AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: session, expiresAt: expiration,
                                           assumedRoleARN: xml[result + "AssumedRoleUser/Arn"]))
        }
        // The Query API's error document; some front ends answer a bare <Error>.
        let code = xml["ErrorResponse/Error/Code"] ?? xml["Error/Code"]
        guard let code, !code.isEmpty else { return nil }
        let message = xml["ErrorResponse/Error/Message"] ?? xml["Error/Message"] ?? ""
        return .failure(Refusal(code: printable(code, limit: 64), message: printable(message, limit: 300), status: response.status))
    }

    /// Text from the far side, fit for a sentence: printable ASCII and spaces only, cut.
    static func printable(_ text: String, limit: Int) -> String {
        var out = String(String.UnicodeScalarView(text.unicodeScalars.map { ($0.value >= 0x20 && $0.value < 0x7F) ? $0 : " " }))
        while out.hasSuffix(" ") || out.hasSuffix(".") { out.removeLast() }
        if out.count > limit { out = String(out.prefix(limit)) + "…" }
        return out
    }
}
