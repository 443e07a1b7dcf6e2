import BrokerProtocol

/// Why a call to authbrokerd failed.
///
/// Every case's ``description`` is one sentence a user can read; `authctl` adds what to do
/// next and picks its exit status from the case (and, for ``rpc(_:)``, from the code).
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Neither `AUTHBROKER_SOCKET` nor `XDG_RUNTIME_DIR` is set, so there is no socket to
    /// connect to.
    case noSocketPath
    /// Nothing listens on the socket: it does not exist (`ENOENT`) or refuses the
    /// connection (`ECONNREFUSED`). The associated value is the socket's path.
    case daemonNotRunning(path: String)
    /// Something may listen on the socket but it cannot be reached: no permission, the
    /// path is too long for a Unix socket address, or the socket cannot be created.
    case cannotConnect(path: String, reason: String)
    /// Reading or writing the connected socket failed, or the daemon closed the connection
    /// before it answered. The text names the path or the operation and the reason.
    case io(String)
    /// The daemon answered something that is not a JSON-RPC response of the expected shape,
    /// or a response line longer than ``BrokerConnection/maxResponseBytes``.
    case badResponse(String)
    /// The daemon answered with a JSON-RPC error. `RPCError.kind` tells which one;
    /// `RPCError.message` is the daemon's sentence for the user.
    case rpc(RPCError)
    /// No answer came within the timeout the caller gave for this call.
    case timedOut(method: String, after: Duration)

    /// The failure as one sentence for a user, without advice on what to do next (that
    /// depends on the program: `authctl` adds its own).
    public var description: String {
        switch self {
        case .noSocketPath:
            return "neither \(SocketPath.environmentVariable) nor XDG_RUNTIME_DIR is set, so authbrokerd's socket cannot be found"
        case .daemonNotRunning(let path):
            return "authbrokerd is not running on \(path)"
        case .cannotConnect(let path, let reason):
            return "cannot connect to authbrokerd on \(path): \(reason)"
        case .io(let text):
            return text
        case .badResponse(let text):
            return "authbrokerd answered something unexpected: \(text)"
        case .rpc(let error):
            return error.message.isEmpty ? "authbrokerd answered error \(error.code)" : error.message
        case .timedOut(let method, let after):
            return "authbrokerd did not answer \(method) within \(Self.text(after))"
        }
    }

    /// "15 s", "1.5 s", "250 ms": a deadline as a person writes it.
    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let millis = attoseconds / 1_000_000_000_000_000
        if millis == 0 { return "\(seconds) s" }
        if seconds == 0 { return "\(millis) ms" }
        let tenths = millis / 100
        return tenths * 100 == millis ? "\(seconds).\(tenths) s" : "\(seconds * 1000 + millis) ms"
    }
}
