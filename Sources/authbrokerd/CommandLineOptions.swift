#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol

/// authbrokerd's command line: `--config`, `--log-level`, `--check-config`, `--help` and
/// `--version`.
///
/// Read by hand rather than with ArgumentParser: the daemon stays resident all session,
/// and the parser's code and metadata cost half a megabyte of its idle memory
/// (docs/performance.md). The manual page is docs/man/authbrokerd.8.
struct CommandLineOptions: Equatable {
    var config: String?
    var logLevel: String?

    static let usage = """
        USAGE: authbrokerd [--config <config>] [--log-level <log-level>]
               authbrokerd --check-config [--config <config>]

        The authbroker daemon: signs in to OAuth/OIDC providers and serves access tokens over a Unix socket.

        Reads $AUTHBROKER_CONFIG, else $XDG_CONFIG_HOME/authbroker/config.toml, and listens on \
        $AUTHBROKER_SOCKET, else $XDG_RUNTIME_DIR/authbroker/socket. Usually started by systemd \
        through authbroker.socket, which hands it the listening socket (LISTEN_FDS); see docs/systemd.md.

        SIGHUP re-reads the configuration as one transaction (an invalid file, or accounts the \
        Secret Service cannot give, leave the running one in force, and STATUS and daemon.status \
        say so); \
        SIGTERM and SIGINT stop it. Under systemd it reports READY=1, RELOADING=1 and STOPPING=1 \
        on $NOTIFY_SOCKET and logs with journal priorities.

        Under systemd (or with AUTHBROKER_SANDBOX=on; off turns it off) it confines itself with \
        Landlock: it reads the system and its configuration's folder, writes only its socket's \
        folder, and nothing else of $HOME; a helper process, authbroker-id, started first, \
        identifies callers for the [[allow]] rules (docs/security.md, "Confinement").

        Exit status: 0 stopped by a signal, or idle ([daemon] idle_exit, socket-activated only); \
        1 cannot listen; 64 bad command line; 71 the confinement asked for cannot be put in force; \
        78 configuration error (also --check-config's answer for an invalid file). A Secret Service that is missing, locked or hung does not stop it: \
        requests that need it are answered -32005 (secret store unavailable) until it answers; \
        the same for the kernel keyring ([daemon] store = "kernel-keyring", for headless hosts) \
        when the kernel refuses its calls.

        OPTIONS:
          --config <config>       The configuration file.
          --check-config          Read and check the configuration file, print whether it is
                                  valid, and exit (0 valid, 78 not) without starting anything:
                                  before `systemctl --user reload authbroker.service`.
          --log-level <log-level> Log level: trace, debug, info, notice, warning, error
                                  (default info, or $AUTHBROKER_LOG_LEVEL).
          --version               Show the version.
          -h, --help              Show help information.

        """

    /// The levels `--log-level` and `$AUTHBROKER_LOG_LEVEL` take: swift-log's names, the
    /// six documented ones first (`critical` is read but never needed).
    static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    /// What the command line asks for.
    enum Parsed: Equatable {
        case run(CommandLineOptions)
        /// `--check-config`: check the file (`--config`, else the default) and exit.
        case checkConfig(String?)
        case help
        case version
        /// A sentence saying what is wrong.
        case invalid(String)
    }

    /// Reads the arguments after the program name.
    static func parse(_ arguments: some Sequence<String>) -> Parsed {
        var options = CommandLineOptions()
        var rest = Array(arguments)[...]
        var check = false
        while let argument = rest.popFirst() {
            var name = argument
            var value: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            switch name {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--check-config" where value == nil: check = true
            case "--config", "--log-level":
                if value == nil {
                    guard let next = rest.popFirst(), !next.hasPrefix("-") else { return .invalid("\(name) needs a value") }
                    value = next
                }
                guard let value, !value.isEmpty else { return .invalid("\(name) needs a value") }
                // As with ArgumentParser before, a repeated option's last value counts: a
                // wrapper may append to a command line it was given.
                if name == "--log-level", !logLevels.contains(value) {
                    return .invalid("--log-level must be one of \(logLevels.prefix(6).joined(separator: ", ")), not '\(value.prefix(64))'")
                }
                if name == "--config" { options.config = value } else { options.logLevel = value }
            default:
                return .invalid("unknown argument '\(argument.prefix(64))'")
            }
        }
        return check ? .checkConfig(options.config) : .run(options)
    }

    /// The options, or the process ends: help and version print and exit 0, a bad command
    /// line prints why and exits 64 (EX_USAGE).
    static func fromProcess() -> CommandLineOptions {
        switch parse(CommandLine.arguments.dropFirst()) {
        case .run(let options): return options
        case .checkConfig(let path):
            exit(ConfigCheck.run(path: path))
        case .help:
            print(usage, terminator: "")
            exit(0)
        case .version:
            print(BrokerVersion.current)
            exit(0)
        case .invalid(let problem):
            writeStderr("authbrokerd: \(problem)\nUsage: authbrokerd [--config <config>] [--log-level <log-level>]\n  See 'authbrokerd --help' for more information.\n")
            exit(64)
        }
    }
}
