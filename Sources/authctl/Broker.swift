import ArgumentParser
import BrokerClient
import BrokerProtocol

/// How every command talks to authbrokerd: connect, call, and on failure print one
/// sentence and exit with the failure's status.
enum Broker {
    /// Connects to authbrokerd and runs `body` with the connection.
    ///
    /// A failure is printed as `authctl: <sentence>` on stderr and becomes the
    /// ``ExitStatus`` for its kind, thrown as ArgumentParser's `ExitCode` (which exits
    /// without printing anything more).
    static func session<T>(_ body: (BrokerConnection) throws(ClientError) -> T) throws(ExitCode) -> T {
        do {
            let connection = try BrokerConnection()
            return try body(connection)
        } catch {
            Output.error(sentence(for: error))
            throw ExitCode(ExitStatus(for: error).rawValue)
        }
    }

    /// The sentence a user reads for `error`, saying what to do next.
    static func sentence(for error: ClientError) -> String {
        switch error {
        case .noSocketPath:
            return "cannot find authbrokerd's socket because neither \(SocketPath.environmentVariable) nor XDG_RUNTIME_DIR is set: "
                + "set \(SocketPath.environmentVariable) to the socket's path, or use a login session that sets XDG_RUNTIME_DIR"
        case .daemonNotRunning(let path):
            return "authbrokerd is not running on \(path): start it with `systemctl --user start authbroker.socket` or run `authbrokerd &`"
        case .cannotConnect:
            return Output.safe(error.description)
                + ": check that \(SocketPath.environmentVariable) (or XDG_RUNTIME_DIR) leads to authbrokerd's socket and that it is yours"
        case .io:
            return Output.safe(error.description) + ": see `journalctl --user -u authbroker.service` for why"
        case .badResponse:
            return Output.safe(error.description)
                + "; authctl is version \(BrokerVersion.current): check that authbrokerd is the same version"
        case .timedOut:
            return error.description + ": see `journalctl --user -u authbroker.service` for what it is doing"
        case .rpc:
            // The daemon's message is already the sentence, with what to do next.
            return Output.safe(error.description)
        }
    }
}
