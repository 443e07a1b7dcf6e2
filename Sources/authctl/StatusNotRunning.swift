#if canImport(Glibc)
import Glibc
#endif
import BrokerClient
import BrokerProtocol

/// `authctl status` when no daemon answered: why, in a sentence and in the JSON a script
/// reads (docs/cli-json.md).
struct NotRunning: Encodable {
    let running = false
    /// `no_socket_path`, `no_socket`, `refused`, `cannot_connect`, `closed` or `timed_out`.
    var reason: String
    /// The socket authctl tried, when it had one.
    var socket: String?
    /// The sentence printed without --json, saying what to do next.
    var message: String

    /// Nil when `error` is not about reaching the daemon (the daemon answered an error).
    init?(_ error: ClientError, socketExists: (String) -> Bool = NotRunning.exists) {
        message = DaemonCall.sentence(for: error)
        switch error {
        case .noSocketPath:
            reason = "no_socket_path"
        case .daemonNotRunning(let path):
            socket = path
            reason = socketExists(path) ? "refused" : "no_socket"
        case .cannotConnect(let path, _):
            socket = path
            reason = "cannot_connect"
        case .io:
            // What systemd does when socket activation fails: it accepted the connection
            // on the daemon's behalf and drops it once the service gives up.
            socket = SocketPath.resolve()
            reason = "closed"
            message = "authbrokerd is not running: its socket\(socket.map { " " + $0 } ?? "") took the connection but closed it "
                + "without an answer, as systemd does when the service fails to start: \(DaemonCall.serviceStatus) says why "
                + "(its log: `journalctl --user -u authbroker.service`); once that is fixed, start it again with \(DaemonCall.startAgain)"
        case .timedOut:
            socket = SocketPath.resolve()
            reason = "timed_out"
        case .badResponse, .rpc:
            return nil
        }
    }

    enum CodingKeys: String, CodingKey {
        case running, reason, socket, message
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
