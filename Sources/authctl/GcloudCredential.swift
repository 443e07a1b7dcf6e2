import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl gcloud-credential`: the executable of a Google Cloud executable-sourced
/// credential (workload and workforce identity federation).
struct GcloudCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gcloud-credential",
        abstract: "Print the account's ID token (or a JWT access token) as a Google Cloud executable-sourced credential response.",
        discussion: """
            Google's auth libraries and gcloud run it (with GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1) \
            as the credential configuration's credential_source.executable.command, which \
            `authctl setup-gcloud` writes, and exchange what it prints at Google's STS. It \
            prints {"version": 1, "success": true, "token_type", "id_token", \
            "expiration_time"}, or {"version": 1, "success": false, "code", "message"} and \
            exits with the failure's status; nothing goes to stderr, which the libraries \
            read as part of the answer.

            The token is the account's ID token, or with --resource its access token for \
            that resource (token type jwt). $GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE (the \
            configuration's subject_token_type) names the token type printed, \
            $GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE (the pool provider) is named in failures, and when \
            $GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE is set (the configuration's output_file) \
            the answer is written there too, readable by you only: the token is then in a \
            file until it expires. --timeout ends the wait before the library's \
            timeout_millis would.
            """
    )

    @OptionGroup var target: AccountOptions

    @Option(help: ArgumentHelp("Print the access token for this resource (a JWT) instead of the ID token.", valueName: "url"),
            completion: Completions.resource)
    var resource: String?

    @Option(name: .customLong("min-ttl"), help: ArgumentHelp("Seconds the token must still live.", valueName: "seconds"))
    var minTTL: Int?

    @Option(help: ArgumentHelp("Seconds to wait for authbrokerd (a refresh at the provider) before answering with a failure; default 25, below the libraries' 30 s.", valueName: "seconds"))
    var timeout: Int = 25

    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    static let jwtType = "urn:ietf:params:oauth:token-type:jwt"

    func validate() throws {
        if let minTTL, !TokenGetParams.minTTLRange.contains(minTTL) {
            throw ValidationError("--min-ttl takes \(TokenGetParams.minTTLRange.lowerBound) to \(TokenGetParams.minTTLRange.upperBound) seconds")
        }
        guard (1...600).contains(timeout) else { throw ValidationError("--timeout takes 1 to 600 seconds") }
    }

    func run() throws {
        let response = answer()
        let text: String
        do {
            text = try Output.json(response, oneLine: true)
        } catch {
            text = #"{"version":1,"success":false,"code":"failure","message":"cannot print the answer as JSON"}"#
        }
        if response.success, let file = UserFiles.environment("GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE") {
            do throws(UserFileError) {
                try UserFiles.replace(file, with: text + "\n", mode: 0o600)
            } catch {
                return try fail(ExecutableResponse.failure(code: "output_file", message: error.sentence + " (GOOGLE_EXTERNAL_ACCOUNT_OUTPUT_FILE, the configuration's output_file)"), .failure)
            }
        }
        Output.line(text)
        if !response.success { throw ExitCode(response.exitStatus) }
    }

    private func fail(_ response: ExecutableResponse, _ status: ExitStatus) throws {
        Output.line((try? Output.json(response, oneLine: true)) ?? #"{"version":1,"success":false}"#)
        throw ExitCode(status.rawValue)
    }

    /// What to print: the token, or the failure as the format's error response.
    func answer() -> ExecutableResponse {
        let wanted = UserFiles.environment("GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE")
        guard wanted == nil || wanted == Self.idTokenType || wanted == Self.jwtType else {
            return .failure(code: "unsupported_token_type", message: "the credential configuration's subject_token_type is \(Output.safe(wanted ?? "")), but authctl gives OIDC tokens: set it to \(Self.idTokenType) (or \(Self.jwtType)), as `authctl setup-gcloud` writes it")
        }
        if UserFiles.environment("GOOGLE_EXTERNAL_ACCOUNT_REVOKE") == "1" {
            return .failure(code: "unsupported", message: "authctl does not sign out for Google Cloud: run `authctl logout` to sign the account out")
        }
        let (provider, account, minTTL, resource) = (target.provider, target.account, minTTL, resource)
        let outcome: Result<(String, Int64), ClientError>
        do throws(ClientError) {
            let broker = try BrokerConnection(callTimeout: .seconds(timeout))
            if let resource {
                let token = try broker.token(TokenGetParams(resource: resource, provider: provider, account: account, minTTL: minTTL))
                outcome = .success((token.accessToken, token.expiresAt))
            } else {
                let id = try broker.call(.accountIDToken, IDTokenParams(provider: provider, account: account, minTTL: minTTL), as: IDTokenResult.self)
                outcome = .success((id.idToken, id.expiresAt))
            }
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(let (token, expiresAt)):
            let type = wanted ?? (resource == nil ? Self.idTokenType : Self.jwtType)
            return ExecutableResponse(success: true, tokenType: type, idToken: token, expirationTime: expiresAt)
        case .failure(let error):
            let status = ExitStatus(for: error)
            var message = DaemonCall.sentence(for: error)
            if let audience = UserFiles.environment("GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE") {
                message = "no subject token for \(Output.safe(audience)): " + message
            }
            var response = ExecutableResponse.failure(code: status.kind, message: message)
            response.exitStatus = status.rawValue
            return response
        }
    }
}

/// Google's executable response, version 1.
struct ExecutableResponse: Encodable {
    var version = 1
    var success: Bool
    var tokenType: String?
    var idToken: String?
    var expirationTime: Int64?
    var code: String?
    var message: String?
    /// The status authctl exits with (not printed).
    var exitStatus: Int32 = 0

    static func failure(code: String, message: String) -> ExecutableResponse {
        ExecutableResponse(success: false, code: code, message: message, exitStatus: ExitStatus.failure.rawValue)
    }

    enum CodingKeys: String, CodingKey {
        case version, success, code, message
        case tokenType = "token_type"
        case idToken = "id_token"
        case expirationTime = "expiration_time"
    }
}
