#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerServer
import Logging
import NIOCore

/// The running daemon after start-up: tells systemd it is ready, then reacts to SIGHUP
/// (reload), SIGTERM/SIGINT (stop), to its executable being removed (exit) and, when
/// socket-activated, to being idle or to its executable being replaced by an upgrade (exit).
struct Lifecycle {
    let broker: Broker
    let server: BrokerServer
    let configPath: String
    let notifier: SystemdNotifier
    let socketActivated: Bool
    /// What the Landlock confinement lets the daemon read besides the system; nil unconfined.
    let confinedTo: [String]?
    /// The file the daemon runs, watched for an upgrade; nil when it could not be read.
    let executable: UpgradeWatch.Executable?
    let logger: Logger

    /// Why the daemon stopped.
    enum Ending {
        case signal(Int32)
        case idle(seconds: Int)
        case upgraded(path: String)
        case removed(path: String)
    }

    /// Ends the back-offs of providers that could not be reached whenever this computer's
    /// network changes (`NetworkWatch`).
    private func watchNetwork() {
        let (broker, logger) = (broker, logger)
        let refused = NetworkWatch.start {
            Task {
                let ended = await broker.providers.networkChanged()
                guard !ended.isEmpty else { return }
                logger.notice("this computer's network changed: the next request to \(ended.joined(separator: ", ")) is sent at once, although \(ended.count == 1 ? "it" : "they") could not be reached a moment ago")
            }
        }
        if let refused { logger.warning("\(refused)") }
    }

    enum Event {
        case signal(Int32)
        case idle
        /// The executable was replaced or removed (`UpgradeWatch`).
        case changed(path: String, UpgradeWatch.Change)
        /// The first quiet moment after that: the daemon stops.
        case quietAfterChange(Ending)
    }

    /// What the running daemon reacts to, its signals among them. Made before the server
    /// answers: once a caller is answered, SIGHUP reloads and SIGTERM stops cleanly rather
    /// than meeting the default action, which ends the daemon without a word (a script
    /// that reloads it as soon as it answers lost it so). A signal that comes before `run`
    /// waits for it.
    struct Events {
        let stream: AsyncStream<Event>
        let continuation: AsyncStream<Event>.Continuation
        let signals: Signals.Subscription

        static func watchingSignals() -> Events {
            let (stream, continuation) = AsyncStream.makeStream(of: Event.self)
            let signals = Signals.watch([SIGTERM, SIGINT, SIGHUP]) { continuation.yield(.signal($0)) }
            return Events(stream: stream, continuation: continuation, signals: signals)
        }
    }

    /// Runs until a stop signal or idle exit, then stops serving.
    func run(_ inbox: Events) async -> Ending {
        let (events, continuation) = (inbox.stream, inbox.continuation)
        defer { inbox.signals.cancel() }

        // Started afresh after each reload: a watch asleep for the old setting (60 s while
        // idle_exit is 0) would otherwise keep a new idle_exit waiting that long.
        let watch = IdleWatch(broker: broker, activity: server.activity)
        let startIdleWatch = { () -> Task<Void, Never> in
            Task {
                await watch.wait()
                if !Task.isCancelled { continuation.yield(.idle) }
            }
        }
        var idleTask: Task<Void, Never>?
        if socketActivated {
            idleTask = startIdleWatch()
        } else if broker.config.daemon.idleExit > 0 {
            logger.notice("idle_exit is ignored: the daemon was not socket-activated, so nothing would start it again")
        }
        defer { idleTask?.cancel() }
        var upgradeTask: Task<Void, Never>?
        defer { upgradeTask?.cancel() }

        // The server answers from here on: say so at once, so that a caller who was answered
        // finds the unit active, not still starting (systemd learns it from this message,
        // the caller from its answer).
        notifier.ready(status: readyStatus())
        let trims = startTrimming(continuation)
        defer { trims?.signal() }
        watchNetwork()
        let storeTask = readyAgainOnceTheStoreIsRead()
        defer { storeTask?.cancel() }
        var ending = Ending.signal(SIGTERM)
        loop: for await event in events {
            switch event {
            case .signal(SIGHUP):
                await reload()
                if socketActivated {
                    idleTask?.cancel()
                    idleTask = startIdleWatch()
                }
            case .signal(let number):
                ending = .signal(number)
                break loop
            case .idle:
                ending = .idle(seconds: broker.config.daemon.idleExit)
                break loop
            case .changed(let path, let change):
                let end = change == .removed ? Ending.removed(path: path) : .upgraded(path: path)
                upgradeTask = changed(path, change) { continuation.yield(.quietAfterChange(end)) }
            case .quietAfterChange(let end):
                ending = end
                break loop
            }
        }
        continuation.finish()
        announce(ending)
        await stopServing()
        return ending
    }

    /// Hands start-up's garbage (the configuration, the keyring's answers) back, and starts
    /// the thread that hands freed memory back when the daemon is quiet, which also looks
    /// at the executable (an upgrade, a removal).
    private func startTrimming(_ continuation: AsyncStream<Event>.Continuation) -> StopSignal? {
        MemoryTrim.trim()
        var trimmer = MemoryTrim(broker: broker, activity: server.activity)
        if let executable {
            let watch = UpgradeWatch(executable) { continuation.yield(.changed(path: executable.path, $0)) }
            trimmer.alsoAtEachLook = { watch.look() }
        }
        let trims = trimmer.start()
        if trims == nil { logger.warning("cannot start the thread that hands freed memory back; the daemon keeps what it freed") }
        return trims
    }

    /// The STATUS line says the store is unavailable until its accounts are loaded: said
    /// again once they are; nil when they already are.
    private func readyAgainOnceTheStoreIsRead() -> Task<Void, Never>? {
        guard broker.accounts.storeFailure != nil else { return nil }
        return Task {
            while !Task.isCancelled, broker.accounts.storeFailure != nil {
                try? await Task.sleep(for: .seconds(1))
            }
            if !Task.isCancelled { notifier.ready(status: readyStatus()) }
        }
    }

    /// Says in the log and to systemd why the daemon stops.
    private func announce(_ ending: Ending) {
        switch ending {
        case .signal(let number):
            logger.notice("stopping", metadata: ["signal": "\(Signals.name(number))"])
            notifier.stopping(status: "stopping (\(Signals.name(number)))")
        case .idle(let seconds):
            logger.notice("idle; exiting until the next connection", metadata: ["idle_exit": "\(seconds)"])
            notifier.stopping(status: "idle for \(seconds) s; systemd starts it again on the next connection")
        case .upgraded(let path):
            logger.notice("\(path) was replaced (an upgrade): exiting so that the next connection starts the new one")
            notifier.stopping(status: "\(path) was replaced (an upgrade); systemd starts the new one on the next connection")
        case .removed(let path):
            logger.notice("\(path) was removed (authbroker uninstalled): exiting, so that a program no longer installed serves no tokens")
            notifier.stopping(status: "\(path) was removed (authbroker uninstalled); install it again to be served")
        }
    }

    /// After an upgrade replaced the executable: socket-activated, the daemon stops at its
    /// first quiet moment (`report`) and the socket starts the new executable on the next
    /// connection. Started by hand, nothing would start it again, and with the memory store
    /// a stop would forget every sign-in: then it only says in the log to restart it.
    /// After the executable was removed it stops at its first quiet moment however it was
    /// started: nothing is installed to serve tokens any more.
    private func changed(_ path: String, _ change: UpgradeWatch.Change, report: @escaping @Sendable () -> Void) -> Task<Void, Never>? {
        let (activity, signIns) = (server.activity, broker.signIns)
        let whenQuiet = {
            Task {
                await UpgradeWatch.waitForQuiet(activity, signIns: signIns)
                if !Task.isCancelled { report() }
            }
        }
        if change == .removed {
            logger.notice("\(path) was removed (authbroker uninstalled): exiting once no request or sign-in is in progress")
            return whenQuiet()
        }
        guard socketActivated else {
            logger.notice("\(path) was replaced (an upgrade): restart authbrokerd to run the new one")
            return nil
        }
        guard broker.config.daemon.store != .memory else {
            logger.notice(
                "\(path) was replaced (an upgrade): restart authbrokerd to run the new one (`systemctl --user restart authbroker.service`; the memory store forgets its sign-ins then)")
            return nil
        }
        logger.info("\(path) was replaced (an upgrade): exiting once no request or sign-in is in progress")
        return whenQuiet()
    }

    /// Re-reads the configuration file and puts it in force; an invalid file, or one whose
    /// accounts cannot be read, leaves the running configuration as it is, and says so in
    /// the log, the unit's STATUS and `daemon.status`.
    private func reload() async {
        notifier.reloading()
        logger.notice("reloading the configuration", metadata: ["config": "\(configPath)"])
        var refusal: String?
        do {
            let config = try ConfigLoader.load(path: configPath)
            // New connections carry their writers before the rules that check them apply.
            if !config.policy.isOpen { server.recordWriters(true) }
            _ = try await broker.reload(config)
            NamespaceCheck.warnIfCallersAreHidden(config.policy, logger: logger)
            RuleFileCheck.warnAboutUnmatchableRules(config.policy, home: getenv("HOME").map { String(cString: $0) }, logger: logger)
        } catch let error as ConfigError {
            let why = confinedTo.flatMap { Self.outsideConfinement(error, readable: $0) } ?? "\(error)"
            logger.error("the new configuration is not valid; still running on the previous one", metadata: ["error": "\(why)"])
            refusal = "the new configuration is not valid: \(why)"
        } catch let error as BrokerError {
            logger.error("the new configuration could not be put in force; still running on the previous one", metadata: ["error": "\(error.message)"])
            refusal = "the new configuration could not be put in force: \(error.message)"
        } catch {
            logger.error("the configuration reload failed; still running on the previous one", metadata: ["error": "\(error)"])
            refusal = "the configuration reload failed: \(error)"
        }
        broker.providers.noteReload(refused: refusal)
        server.recordWriters(!broker.gate.policy.isOpen)
        notifier.ready(status: readyStatus())
    }

    /// The sentence for a configuration file the confinement keeps the daemon from reading
    /// on reload: a config.toml that is a link out of its folder (into a dotfiles
    /// repository, say) was read at start, before the confinement, but not since. Names
    /// where the link leads, so that a link nobody meant (into ~/.ssh) stands out; nil when
    /// the file is unreadable for another reason.
    static func outsideConfinement(_ error: ConfigError, readable: [String]) -> String? {
        guard error.key == nil, error.systemError == EACCES || error.systemError == EPERM,
              let real = realpath(error.file, nil) else { return nil }
        let target = String(cString: real)
        free(real)
        guard target != error.file, !readable.contains(where: { target == $0 || target.hasPrefix($0 + "/") }) else { return nil }
        // The first readable place is the configuration's own (Sandbox.init).
        let own = readable.first ?? Sandbox.parent(of: error.file)
        return "\(error.file) cannot be read on reload (Permission denied): it is a link to \(target), and authbrokerd's confinement (Landlock) lets it read "
            + "only \(own) of your files, where the configuration was when it started: restart it to read the file "
            + "(`systemctl --user restart authbroker.service`), or keep config.toml itself in \(Sandbox.parent(of: error.file)) (docs/security.md, \"Confinement\")"
    }

    /// Stops accepting, gives requests in flight a few seconds to finish (a refresh must
    /// get to store its rotated refresh token), then closes everything.
    private func stopServing() async {
        server.stopAccepting()
        for _ in 0..<100 where server.activity.requestsInFlight > 0 {
            try? await Task.sleep(for: .milliseconds(100))
        }
        if server.activity.requestsInFlight > 0 {
            logger.warning("stopping with requests still in flight", metadata: ["requests": "\(server.activity.requestsInFlight)"])
        }
        await server.stop()
    }

    /// The unit's STATUS line: what is served, and what is wrong (a refused reload, a
    /// store that cannot be read), so `systemctl --user status` shows it without the log.
    private func readyStatus() -> String {
        let names = broker.config.providers.map(\.name).joined(separator: ", ")
        var status = "serving tokens for \(names)"
        if let failure = broker.accounts.storeFailure {
            status += "; secret store unavailable (\(failure.reason)): \(failure.message)"
        }
        if let refused = broker.providers.reloadRefusal {
            status += "; last reload refused, running on the previous configuration: \(refused.message)"
        }
        return status
    }
}
