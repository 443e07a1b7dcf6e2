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
        // Before any other thread has a heap (`MemoryTrim.configureHeaps`).
        MemoryTrim.configureHeaps()
        let options = CommandLineOptions.fromProcess()
        let daemon = Daemon(config: options.config, logLevel: options.logLevel)
        // Here, before the first await, the process still has its one thread (the main
        // one); `run` goes on in the concurrency runtime's threads. Landlock confines only
        // the thread that asks and the threads it makes later, so `prepare` confines.
        let prepared = daemon.prepare()
        await daemon.run(prepared)
    }

    /// What `prepare` read and set up on the main thread, before any other thread exists.
    struct Prepared {
        let logger: Logger
        let notifier: SystemdNotifier
        let path: String
        let settings: BrokerConfig
        let inherited: SocketActivation.Listener?
        let socketPath: String
        let inspector: ProcessInspector
        /// What the confinement lets the daemon read besides the system; nil unconfined.
        let confinedTo: [String]?
        /// The file the daemon runs, watched for an upgrade that replaces it.
        let executable: UpgradeWatch.Executable?
        /// Where the audit trail goes: the journal (stderr is its stream), else this file.
        let auditFile: String?
    }

    /// Logging, the configuration, the socket, and the confinement (`confine`).
    func prepare() -> Prepared {
        Hardening.apply()
        let executable = UpgradeWatch.Executable.running()
        let env: (String) -> String? = { getenv($0).map { String(cString: $0) } }
        // --log-level is checked with the command line; a mistyped variable (a unit's
        // Environment= line) does not stop the daemon, but is said rather than ignored.
        let variable = logLevel == nil ? env("AUTHBROKER_LOG_LEVEL").flatMap { $0.isEmpty ? nil : $0 } : nil
        let level = Logger.Level(rawValue: logLevel ?? variable ?? "info") ?? .info
        let journal = StderrLogHandler.stderrIsJournal(env("JOURNAL_STREAM"))
        LoggingSystem.bootstrap { StderrLogHandler(label: $0, level: level, journal: journal) }
        let logger = Logger(label: "authbrokerd")
        if let variable, Logger.Level(rawValue: variable) == nil {
            logger.warning("AUTHBROKER_LOG_LEVEL is not a log level, so the level is info: set it to one of \(CommandLineOptions.logLevels.prefix(6).joined(separator: ", "))",
                           metadata: ["value": "\(variable.prefix(64))"])
        }
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

        // Confinement comes before the first thread (the event loops, the store's pool).
        // The audit trail: in the journal under systemd, else in a file of its own, whose
        // folder the confinement must let the daemon write in.
        let auditFile = journal ? nil : AuditLog.path(environment: env)
        let (inspector, confinedTo) = confine(configPath: path, socketFolder: inherited == nil ? Sandbox.parent(of: socketPath) : nil,
                                              auditFile: auditFile, env: env, logger: logger, notifier)
        return Prepared(logger: logger, notifier: notifier, path: path, settings: settings, inherited: inherited,
                        socketPath: socketPath, inspector: inspector, confinedTo: confinedTo, executable: executable,
                        auditFile: auditFile)
    }

    func run(_ prepared: Prepared) async {
        let env: (String) -> String? = { getenv($0).map { String(cString: $0) } }
        let (logger, notifier, path, settings, inherited, socketPath, inspector) = (
            prepared.logger, prepared.notifier, prepared.path, prepared.settings, prepared.inherited, prepared.socketPath,
            prepared.inspector)

        var store: any CredentialStore
        switch settings.daemon.store {
        case .secretService: store = SecretServiceStore(timeout: .seconds(settings.daemon.storeTimeout))
        case .kernelKeyring:
            let keyring = KernelKeyringStore(keyTTL: UInt32(settings.daemon.kernelKeyringTTL))
            store = keyring
            Self.keepRenewing(keyring, logger: logger)
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
        // One notifier (one bus connection) announces sign-ins and asks confirm rules' questions.
        let desktop = DesktopNotifier(launcher: launcher, logger: logger)
        // A store that waits on its own prompt (KeePassXC) is also told at the desktop.
        if settings.daemon.store == .secretService { store = StorePromptNotices(store, desktop: desktop) }
        let auditSink: any AuditSink = prepared.auditFile.map { AuditFileSink(path: $0, logger: logger) } ?? JournalAuditSink()
        let broker = Broker(config: settings, store: store, transport: transport, socketPath: socketPath, logger: logger,
                            redirects: LoopbackRedirects(group: loops), announcer: desktop, confirmer: desktop,
                            trustAsker: desktop, audit: AuditTrail(sink: auditSink))
        // A store that cannot be read does not stop the start (no exit, no restart loop):
        // the broker serves without its accounts and reads it again until it can.
        await broker.start()

        let server = BrokerServer(broker: broker, socketPath: socketPath, logger: logger, eventLoops: loops,
                                  inheritedSocket: inherited?.descriptor, inspector: inspector)
        // Before the first answer (`Lifecycle.Events`); not sooner, so SIGTERM ends a start that hangs.
        let events = Lifecycle.Events.watchingSignals()
        do {
            try await server.start()
        } catch {
            fail("\(error)", status: 1, notifier)
        }
        logger.notice("ready", metadata: [
            "version": "\(BrokerVersion.current)",
            "providers": "\(settings.providers.map(\.name).joined(separator: ","))",
            "store": "\(store.kind)",
            "store_available": "\(broker.accounts.storeFailure == nil)",
            "socket_activated": "\(inherited != nil)",
        ])
        NamespaceCheck.warnIfCallersAreHidden(settings.policy, logger: logger)
        RuleFileCheck.warnAboutUnmatchableRules(settings.policy, home: env("HOME"), logger: logger)
        PtraceCheck.warnIfOpen(settings.policy, logger: logger)
        Hardening.warnIfFreedMemoryIsKept(logger: logger)
        let lifecycle = Lifecycle(
            broker: broker, server: server, configPath: path, notifier: notifier,
            socketActivated: inherited != nil, confinedTo: prepared.confinedTo, executable: prepared.executable, logger: logger)
        _ = await lifecycle.run(events)
    }

    /// Starts the identification helper and confines the daemon (`Sandbox`) when asked
    /// to; returns how callers are to be identified. Exits when the confinement asked for
    /// cannot be put in force. Also returns what the confinement lets the daemon read
    /// (nil when it runs unconfined), for the sentence of a reload it keeps from reading.
    private func confine(configPath: String, socketFolder: String?, auditFile: String?, env: (String) -> String?, logger: Logger,
                         _ notifier: SystemdNotifier) -> (ProcessInspector, [String]?) {
        let choice: Sandbox.Choice
        switch Sandbox.choice(environment: env) {
        case .success(let chosen): choice = chosen
        case .failure(let failure): fail(failure.description, status: 64, notifier)
        }
        _ = NamespaceCheck.ownsUserNamespace  // read while the parent process may still be looked at
        guard choice != .off else { return (.direct, nil) }
        // The folder the socket goes in must exist to be allowed; SocketListener checks it.
        if let socketFolder { _ = mkdir(socketFolder, 0o700) }
        guard let inspector = ProcessInspector.start() else {
            fail("cannot start the identification helper: \(String(cString: strerror(errno)))", status: 71, notifier)
        }
        var sandbox = Sandbox(configPath: configPath, socketFolder: socketFolder, environment: env)
        // The audit file's folder, made now so that it can be allowed (and rotated in).
        if let auditFile, let folder = AuditFileSink.makeFolder(for: auditFile) { sandbox.writable.append(folder) }
        do {
            switch try sandbox.apply() {
            case .confined(let abi):
                if abi >= 6, let why = sandbox.abstractSocketsNeeded {
                    logger.notice("abstract Unix sockets stay reachable from the daemon's sandbox: \(why)")
                }
                logger.info("confined by Landlock", metadata: [
                    "abi": "\(abi)", "abstract_sockets_scoped": "\(abi >= 6 && sandbox.abstractSocketsNeeded == nil)",
                    "readable": "\(sandbox.readable.joined(separator: ","))",
                    "writable": "\(sandbox.writable.joined(separator: ","))", "identification_helper": "\(inspector.helperPID ?? 0)",
                ])
                return (inspector, sandbox.readable)
            case .unsupported(let why):
                if choice == .required { fail("AUTHBROKER_SANDBOX=on, but \(why)", status: 71, notifier) }
                logger.warning("authbrokerd runs unconfined (only the systemd unit's options apply): \(why)")
            }
        } catch {
            fail(error.description, status: 71, notifier)
        }
        return (inspector, nil)
    }

    /// Renews the kernel keyring's keys while the daemon runs (`kernel_keyring_ttl`), so that
    /// only the keys of a user whose daemon stopped running expire: at start (loading them
    /// renews them too) and every quarter of their life, a day at the most.
    private static func keepRenewing(_ keyring: KernelKeyringStore, logger: Logger) {
        guard let interval = keyring.renewalInterval else { return }
        Task.detached {
            while true {
                try? await Task.sleep(for: interval)
                do throws(StoreError) {
                    let renewed = try keyring.renewAll()
                    logger.debug("kernel keyring keys renewed", metadata: ["keys": "\(renewed)", "ttl": "\(keyring.keyTTL)"])
                } catch {
                    logger.warning("the kernel keyring's keys could not be renewed; they expire kernel_keyring_ttl after they were last saved or loaded", metadata: ["error": "\(error.message)"])
                }
            }
        }
    }

    /// Prints the sentence, tells systemd why (STATUS, ERRNO-free), and exits.
    private func fail(_ message: String, status: Int32, _ notifier: SystemdNotifier) -> Never {
        writeStderr("authbrokerd: \(message)\n")
        notifier.send("STATUS=\(message)")
        Glibc.exit(status)
    }
}
