@testable import BrokerCore
import BrokerCrypto
import Foundation
import OAuth
import Synchronization

/// A STUB AWS STS behind the broker's `HTTPTransport`, beside the STUB provider
/// (`StubTransport`, which answers every other URL): it answers AssumeRoleWithWebIdentity
/// from a script, with the error documents moto's server never produces
/// (`InvalidIdentityToken`, `ExpiredTokenException`, `AccessDenied`, throttling…), and
/// keeps the form of each request. The real STS API is moto's in test_clouds.py.
final class StubSTS: HTTPTransport {
    static let endpoint = "https://sts.amazonaws.com"

    enum Answer: Sendable {
        /// Credentials expiring `life` seconds after the clock's now, numbered.
        case credentials(life: Int64)
        /// An AWS Query error document with this code and message, at this HTTP status.
        case error(code: String, message: String, status: Int)
        /// This body as it is.
        case raw(status: Int, body: String)
    }

    private struct State {
        var script: [Answer] = []
        var standing = Answer.credentials(life: 3600)
        var forms: [[String: String]] = []
        var delay: Duration = .zero
    }

    let provider: StubTransport
    private let clock: TestClock
    private let state = Mutex(State())

    init(provider: StubTransport, clock: TestClock) {
        self.provider = provider
        self.clock = clock
    }

    func answerAlways(_ answer: Answer) { state.withLock { $0.standing = answer } }
    func script(_ answers: Answer...) { state.withLock { $0.script += answers } }
    /// Each STS answer comes this much later (concurrent first callers meet in flight).
    func slow(_ delay: Duration) { state.withLock { $0.delay = delay } }

    /// The form of each request that reached STS.
    var forms: [[String: String]] { state.withLock { $0.forms } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        guard request.url.hasPrefix("https://sts.") else { return try await provider.send(request) }
        let form = Self.form(request.body ?? [])
        let (answer, number, delay) = state.withLock { s -> (Answer, Int, Duration) in
            s.forms.append(form)
            return (s.script.isEmpty ? s.standing : s.script.removeFirst(), s.forms.count, s.delay)
        }
        if delay > .zero { try? await Task.sleep(for: delay) }
        switch answer {
        case .credentials(let life):
            let expiration = Self.iso8601(Int64(clock.now) + life)
            let body = """
                <AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
                  <AssumeRoleWithWebIdentityResult>
                    <Credentials>
                      <AccessKeyId>ASIASTUB\(number)</AccessKeyId>
                      <SecretAccessKey>stub-secret-\(number)+/=</SecretAccessKey>
                      <SessionToken>stub-session-\(number)&amp;more</SessionToken>
                      <Expiration>\(expiration)</Expiration>
                    </Credentials>
                    <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/dev/\(form["RoleSessionName"] ?? "")</Arn></AssumedRoleUser>
                  </AssumeRoleWithWebIdentityResult>
                </AssumeRoleWithWebIdentityResponse>
                """
            return HTTPResponse(status: 200, headers: ["Content-Type": "text/xml"], body: Array(body.utf8))
        case .error(let code, let message, let status):
            let body = """
                <ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
                  <Error><Type>Sender</Type><Code>\(code)</Code><Message>\(message)</Message></Error>
                  <RequestId>stub-request</RequestId>
                </ErrorResponse>
                """
            return HTTPResponse(status: status, headers: ["Content-Type": "text/xml"], body: Array(body.utf8))
        case .raw(let status, let body):
            return HTTPResponse(status: status, body: Array(body.utf8))
        }
    }

    static func iso8601(_ unix: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(unix)))
    }

    /// The form's pairs, percent-decoded.
    static func form(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            form[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return form
    }
}
