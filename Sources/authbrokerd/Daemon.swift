#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerProtocol
import BrokerServer
import DesktopNotifications
import Logging
import NIOCore
import OAuth
import SecretStore

/// `authbrokerd`: the per-user token broker daemon. Its command line is
/// ``CommandLineOptions``; its manual page docs/man/authbrokerd.8.
@main
struct Daemon {
    let config: String?
    let logLevel: String?

    static func main() async {
        let options = CommandLineOptions.fromProcess()
        await Daemon(config: options.config, logLevel: options.logLevel).run()
    }

    func run() async {
        Hardening.apply()
        let env: (String) -> String? = { getenv($0).map { String(cString: $0) } }
        let level = Logger.Level(rawValue: logLevel ?? env("AUTHBROKER_LOG_LEVEL") ?? "info") ?? .info
        let journal = StderrLogHandler.stderrIsJournal(env("JOURNAL_STREAM"))
        LoggingSystem.bootstrap { StderrLogHandler(label: $0, level: level, journal: journal) }
        let logger = Logger(label: "authbrokerd")
        let notifier = SystemdNotifier(environment: env)

        let path = config ?? ConfigLoader.defaultPath(environment: env)
        var settings: BrokerConfig
        do {
            settings = try ConfigLoader.load(path: path)
        } catch {
            fail("configuration error: \(error)", status: 78, notifier)
        }

        if let allowed = FileLimit.raise(for: settings.daemon.maxConnections) {
            logger.warning("the open-file limit allows fewer connections than max_connections; raise LimitNOFILE or ulimit -n", metadata: [
                "max_connections": "\(settings.daemon.maxConnections)", "allowed": "\(allowed)",
            ])
            // Past the limit accept(2) would fail unanswered; at the cap a client hears -32009.
            settings.daemon.maxConnections = allowed
        }

        let inherited: SocketActivation.Listener?
        do {
            inherited = try SocketActivation.take(environment: env)
        } catch {
            fail(error.description, status: 1, notifier)
        }
        guard let socketPath = inherited?.path ?? SocketPath.resolve() else {
            fail("neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set: set one to choose where to listen", status: 1, notifier)
        }

        let store: any CredentialStore
        switch settings.daemon.store {
        case .secretService: store = SecretServiceStore(timeout: .seconds(settings.daemon.storeTimeout))
        case .memory: store = MemoryStore()
        }
        let transport = NetworkTransport(timeout: Double(settings.daemon.httpTimeout))
        // One event loop serves the connections the front door hands over and the browser
        // sign-in's loopback listeners.
        let loops = BrokerServer.makeEventLoops()
        // Under systemd a browser started from the notification must not inherit the
        // service's sandbox (MemoryDenyWriteExecute, the system-call filter) or cgroup.
        let launcher = env("INVOCATION_ID") != nil
            ? ["systemd-run", "--user", "--collect", "--quiet", "--property=KillMode=process", "--"] : []
        let broker = Broker(config: settings, store: store, transport: transport, socketPath: socketPath, logger: logger,
                            redirects: LoopbackRedirects(group: loops),
                            announcer: DesktopNotifier(launcher: launcher, logger: logger))
        do {
            try await broker.start()
        } catch {
            fail("the refresh-token store is unavailable: \(error.message)", status: 69, notifier)
        }

        let server = BrokerServer(broker: broker, socketPath: socketPath, logger: logger, eventLoops: loops,
                                  inheritedSocket: inherited?.descriptor)
        do {
            try await server.start()
        } catch {
            fail("\(error)", status: 1, notifier)
        }
        logger.notice("ready", metadata: [
            "version": "\(BrokerVersion.current)",
            "providers": "\(settings.providers.map(\.name).joined(separator: ","))",
            "store": "\(store.kind)",
            "socket_activated": "\(inherited != nil)",
        ])
        NamespaceCheck.warnIfCallersAreHidden(settings.policy, logger: logger)
        let lifecycle = Lifecycle(
            broker: broker, server: server, configPath: path, notifier: notifier,
            socketActivated: inherited != nil, logger: logger)
        _ = await lifecycle.run()
    }

    /// Prints the sentence, tells systemd why (STATUS, ERRNO-free), and exits.
    private func fail(_ message: String, status: Int32, _ notifier: SystemdNotifier) -> Never {
        writeStderr("authbrokerd: \(message)\n")
        notifier.send("STATUS=\(message)")
        Glibc.exit(status)
    }
}
