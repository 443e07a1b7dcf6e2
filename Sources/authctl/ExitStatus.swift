import BrokerClient
import BrokerProtocol

/// authctl's exit statuses: one per kind of failure, so that scripts can tell "sign in
/// first" from "the provider is down" without reading the sentence.
///
/// This is the only place that maps failures to numbers; `authctl --help` prints
/// ``helpTable`` and docs/protocol.md lists the same numbers per error code.
enum ExitStatus: Int32, CaseIterable {
    case success = 0
    /// An internal error, or an answer authctl did not understand.
    case failure = 1
    /// No socket path, nothing listening, the connection failed, or no answer came within
    /// the call's deadline.
    case daemonUnavailable = 3
    case loginRequired = 4
    case forbidden = 5
    case providerError = 6
    case providerUnreachable = 7
    case secretStoreUnavailable = 8
    /// Unknown provider, or a request the daemon rejected as malformed.
    case badRequest = 9
    case loginFailed = 10
    case overloaded = 11
    case configuration = 12
    /// A resource's metadata names an authorization server the user has not trusted yet.
    case untrustedServer = 13
    /// ArgumentParser's own status for command-line errors (`EX_USAGE`).
    case usage = 64

    /// The status for a failed call.
    init(for error: ClientError) {
        switch error {
        case .noSocketPath, .daemonNotRunning, .cannotConnect, .io, .timedOut:
            self = .daemonUnavailable
        case .badResponse:
            self = .failure
        case .rpc(let rpcError):
            self = ExitStatus(rpcCode: rpcError.code)
        }
    }

    /// The status for a JSON-RPC error code; codes this version does not know are `.failure`.
    init(rpcCode: Int) {
        guard let kind = RPCErrorCode(rawValue: rpcCode) else {
            self = .failure
            return
        }
        switch kind {
        case .loginRequired: self = .loginRequired
        case .forbidden: self = .forbidden
        case .providerError: self = .providerError
        case .providerUnreachable: self = .providerUnreachable
        case .secretStoreUnavailable: self = .secretStoreUnavailable
        case .unknownProvider, .invalidParams, .invalidRequest, .methodNotFound, .parseError: self = .badRequest
        case .loginFailed: self = .loginFailed
        case .requestTooLarge, .overloaded: self = .overloaded
        case .configuration: self = .configuration
        case .untrustedServer: self = .untrustedServer
        case .internalError: self = .failure
        }
    }

    /// What the status means, for `authctl --help`.
    var meaning: String {
        switch self {
        case .success: return "success"
        case .failure: return "unexpected error, or an answer authctl does not understand"
        case .daemonUnavailable: return "authbrokerd is not running, cannot be reached or did not answer in time"
        case .loginRequired: return "login required: run `authctl login`"
        case .forbidden: return "forbidden by the [[allow]] policy in config.toml"
        case .providerError: return "the provider answered with an OAuth error"
        case .providerUnreachable: return "the provider cannot be reached; try again later"
        case .secretStoreUnavailable: return "the Secret Service is absent, locked or not answering"
        case .badRequest: return "unknown provider or account, or a request authbrokerd rejected"
        case .loginFailed: return "sign-in refused, expired or unknown"
        case .overloaded: return "authbrokerd is at a limit, or the request was too large"
        case .configuration: return "config.toml does not allow this: change it as the message says"
        case .untrustedServer: return "the resource's authorization server is not trusted yet: run `authctl login --resource URL`"
        case .usage: return "wrong command-line usage"
        }
    }

    /// The status's name in `--json` error objects (docs/cli-json.md): part of the stable
    /// schema, so never renamed.
    var kind: String {
        switch self {
        case .success: return "success"
        case .failure: return "failure"
        case .daemonUnavailable: return "daemon_unavailable"
        case .loginRequired: return "login_required"
        case .forbidden: return "forbidden"
        case .providerError: return "provider_error"
        case .providerUnreachable: return "provider_unreachable"
        case .secretStoreUnavailable: return "secret_store_unavailable"
        case .badRequest: return "bad_request"
        case .loginFailed: return "login_failed"
        case .overloaded: return "overloaded"
        case .configuration: return "configuration"
        case .untrustedServer: return "untrusted_server"
        case .usage: return "usage"
        }
    }

    /// The table printed at the end of `authctl --help`.
    static var helpTable: String {
        allCases.map { status in
            let number = String(status.rawValue)
            return "  " + number + String(repeating: " ", count: 4 - number.count) + status.meaning
        }.joined(separator: "\n")
    }
}
