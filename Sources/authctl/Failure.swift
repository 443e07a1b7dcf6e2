import ArgumentParser
import BrokerClient
import BrokerProtocol

/// How a failed command reports itself: `authctl: <sentence>` on stderr, or with `--json`
/// one JSON object on stderr (docs/cli-json.md); the exit status is the same either way.
enum Failure {
    /// Prints the failure and returns the exit status to throw.
    static func report(_ sentence: String, status: ExitStatus, code: Int? = nil, data: ErrorData? = nil,
                       json: Bool) -> ExitCode {
        if json {
            let body = ErrorReport.Body(kind: status.kind, message: sentence, exitStatus: status.rawValue, code: code, data: data)
            Output.note(ErrorReport(error: body).line)
        } else {
            Output.error(sentence)
        }
        return ExitCode(status.rawValue)
    }

    /// Reports a failed call to authbrokerd: its sentence, its status, and for the daemon's
    /// own errors the JSON-RPC code and data.
    static func report(_ error: ClientError, json: Bool) -> ExitCode {
        var code: Int?
        var data: ErrorData?
        if case .rpc(let rpcError) = error {
            code = rpcError.code
            data = rpcError.data
        }
        return report(DaemonCall.sentence(for: error), status: ExitStatus(for: error), code: code, data: data, json: json)
    }

    /// Whether a command line asks for JSON: `--json` before any `--` (after which the
    /// words are another program's, as in `authctl exec -- cmd --json`).
    static func wantsJSON(_ arguments: some Sequence<String>) -> Bool {
        arguments.prefix { $0 != "--" }.contains("--json")
    }
}

/// `{"error":{"kind":"login_required","message":"…","exit_status":4,"code":-32001,"data":{…}}}`.
struct ErrorReport: Encodable {
    struct Body: Encodable {
        /// ``ExitStatus/kind``: what scripts branch on.
        var kind: String
        /// The sentence a person reads, as without --json.
        var message: String
        var exitStatus: Int32
        /// The daemon's JSON-RPC error code, when the daemon answered the error.
        var code: Int?
        /// The daemon's error data (provider, oauth_error, retry_after, limit).
        var data: ErrorData?

        enum CodingKeys: String, CodingKey {
            case kind, message, code, data
            case exitStatus = "exit_status"
        }
    }

    var error: Body

    /// One line of JSON; the plain sentence in the unlikely case it cannot be encoded.
    var line: String {
        (try? Output.json(self, oneLine: true)) ?? "authctl: " + error.message
    }
}
