#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient
import BrokerProtocol

/// How every command talks to authbrokerd: connect, call, and on failure print one
/// sentence and exit with the failure's status.
enum DaemonCall {
    /// Connects to authbrokerd and runs `body` with the connection.
    ///
    /// A failure is printed as `authctl: <sentence>` on stderr (with `json`, as the JSON
    /// error object of docs/cli-json.md) and becomes the ``ExitStatus`` for its kind,
    /// thrown as ArgumentParser's `ExitCode` (which exits without printing anything more).
    ///
    /// Not written with ``attempt(_:)``: the first use of a `Result<T, ClientError>` makes the
    /// runtime instantiate its type and check `ClientError: Error` through every
    /// conformance in the executable, about a third of an `authctl token` process's
    /// instructions (docs/performance.md).
    static func session<T>(json: Bool = false, _ body: (BrokerConnection) throws(ClientError) -> T) throws(ExitCode) -> T {
        do throws(ClientError) {
            let connection = try BrokerConnection(callTimeout: callTimeout())
            return try body(connection)
        } catch {
            throw Failure.report(error, json: json)
        }
    }

    /// Connects to authbrokerd and runs `body`, returning the failure instead of reporting
    /// it: for `authctl status`, whose answer "not running" is not an error.
    static func attempt<T>(_ body: (BrokerConnection) throws(ClientError) -> T) -> Result<T, ClientError> {
        do throws(ClientError) {
            let connection = try BrokerConnection(callTimeout: callTimeout())
            return .success(try body(connection))
        } catch {
            return .failure(error)
        }
    }

    /// The environment variable that sets how long a call (but a sign-in's wait) may take.
    static let timeoutVariable = "AUTHBROKER_TIMEOUT"

    /// The deadline of every call but `login.wait`: `$AUTHBROKER_TIMEOUT` whole seconds
    /// (1-3600; 0 waits without limit), else ``BrokerConnection/defaultCallTimeout``.
    /// A value that is not such a number is ignored rather than fatal: a token script must
    /// not break over a mistyped tuning knob.
    static func callTimeout(_ value: String? = getenv(timeoutVariable).map { String(cString: $0) }) -> Duration? {
        guard let value, !value.isEmpty, value.utf8.count <= 4,
              value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let seconds = Int(value), seconds <= 3600
        else { return BrokerConnection.defaultCallTimeout }
        return seconds == 0 ? nil : .seconds(seconds)
    }

    /// Where a user learns why the socket-activated daemon did not start or stopped.
    static let serviceStatus = "`systemctl --user status authbroker.service`"

    /// How a user starts the socket-activated daemon again. After a failed start systemd
    /// refuses `start` until the units' failure is reset (or its start-limit interval has
    /// passed), so the reset comes first.
    static let startAgain = "`systemctl --user reset-failed authbroker.socket authbroker.service; systemctl --user start authbroker.socket`"

    /// The sentence a user reads for `error`, saying what to do next. In an ssh session
    /// (`SSH_CONNECTION` set), a socket that is not there is a forward that is missing:
    /// authbrokerd runs on the machine the user came from, so starting one here is not the
    /// advice (docs/integrations.md, "Over ssh").
    static func sentence(for error: ClientError, environment get: (String) -> String? = { name in
        getenv(name).map { String(cString: $0) }
    }) -> String {
        let overSSH = !(get("SSH_CONNECTION") ?? "").isEmpty
        switch error {
        case .noSocketPath where overSSH:
            return "cannot find authbrokerd's socket: this is an ssh session, and neither \(SocketPath.environmentVariable) nor XDG_RUNTIME_DIR is set: "
                + "forward authbrokerd's socket from the machine you connect from (`ssh -R PATH:/run/user/UID/authbroker/socket …`) "
                + "and set \(SocketPath.environmentVariable)=PATH here (docs/integrations.md, \"Over ssh\")"
        case .noSocketPath:
            return "cannot find authbrokerd's socket because neither \(SocketPath.environmentVariable) nor XDG_RUNTIME_DIR is set: "
                + "set \(SocketPath.environmentVariable) to the socket's path, or use a login session that sets XDG_RUNTIME_DIR"
        case .daemonNotRunning(let path) where overSSH:
            return "nothing answers on \(path), and this is an ssh session: authbrokerd runs on the machine you connect from, so check "
                + "that this ssh connection forwards its socket here (`ssh -R \(path):/run/user/UID/authbroker/socket …`, or RemoteForward "
                + "in ~/.ssh/config), that the folder of \(path) exists on this host, and that this host's sshd_config has "
                + "`StreamLocalBindUnlink yes` so a stale socket of an earlier session is replaced (docs/integrations.md, \"Over ssh\")"
        case .daemonNotRunning(let path):
            // A socket elsewhere than the local default may be a forward (ssh -R, a bind mount).
            let local = get("XDG_RUNTIME_DIR").map { $0 + "/authbroker/socket" }
            let forward = !(get(SocketPath.environmentVariable) ?? "").isEmpty && path != local
                ? "; if \(SocketPath.environmentVariable) leads to a socket forwarded from another machine (ssh -R, a container's bind mount), check that forward instead"
                : ""
            return "authbrokerd is not running on \(path): start it with \(startAgain) or run `authbrokerd &` "
                + "(\(serviceStatus) says why it stopped)" + forward
        case .cannotConnect:
            return Output.safe(error.description)
                + ": check that \(SocketPath.environmentVariable) (or XDG_RUNTIME_DIR) leads to authbrokerd's socket and that it is yours"
        case .io:
            // Under systemd this is most often a daemon that failed to start: systemd drops
            // the waiting connection once the service gives up.
            return Output.safe(error.description)
                + ": \(serviceStatus) says whether authbrokerd failed to start and why (its log: `journalctl --user -u authbroker.service`); "
                + "once that is fixed, start it again with \(startAgain)"
        case .badResponse:
            return Output.safe(error.description)
                + "; authctl is version \(BrokerVersion.current): check that authbrokerd is the same version"
        case .timedOut:
            return error.description
                + ": \(serviceStatus) says whether it is starting, failing or busy (its log: `journalctl --user -u authbroker.service`); "
                + "set \(timeoutVariable)=SECONDS to wait longer"
        case .rpc(let refused) where refused.kind == .methodNotFound:
            // authctl asks only for methods of its own version: a daemon that does not know
            // one is older, still running after an upgrade installed this authctl.
            return Output.safe(error.description)
                + ": the authbrokerd that answers is older than this authctl (version \(BrokerVersion.current)), as after an upgrade "
                + "while it ran: restart it with `systemctl --user restart authbroker.service` (or start `authbrokerd &` again)"
        case .rpc:
            // The daemon's message is already the sentence, with what to do next.
            return Output.safe(error.description)
        }
    }
}
