import Logging
import Synchronization

/// Background refresh of tokens in use (`refresh_ahead = true`): a token some caller asked
/// for within the provider's `refresh_ahead_window` is refreshed shortly before
/// `refresh_margin` would make the next caller wait for the provider. One task per cache
/// key, started by a request and ended when nobody asked recently, on sign-out, reload or
/// stop; its refreshes go through the account's RefreshQueue like any other.
///
/// Owns: when each key was last asked for, and the running tasks. Built by the composition
/// root and held by the tokens service; the sign-in, sign-out and reload stop it through
/// `TokenForgetting`.
final class RefreshAhead: Sendable {
    struct State {
        /// When a caller last asked for each key of a refresh-ahead provider.
        var lastAsked: [CacheKey: Double] = [:]
        /// The running task of each key, with an id so a task ending removes only itself.
        var tasks: [CacheKey: (id: Int, task: Task<Void, Never>)] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())
    /// The longest single sleep: both clocks are read again after each (the wall clock may
    /// have been stepped, or the machine suspended, which boot time counts).
    private let tick: Duration
    /// Whose queues `TokenForgetting.inTurnWithRefreshes` takes its turn in.
    let refresher: Refresher
    private let providers: ProvidersService
    private let clock: WallClock
    private let logger: Logger

    init(tick: Duration, refresher: Refresher, providers: ProvidersService, clock: WallClock, logger: Logger) {
        self.tick = tick
        self.refresher = refresher
        self.providers = providers
        self.clock = clock
        self.logger = logger
    }

    private var cache: TokenCache { refresher.cache }

    /// Notes that a caller asked for `key`; starts its background refresh if none runs.
    /// Costs one flag test for providers without `refresh_ahead`.
    func askedFor(_ key: CacheKey, provider: Provider) {
        guard provider.config.refreshAhead else { return }
        let now = clock.boottime()
        state.withLock { s in
            s.lastAsked[key] = now
            guard s.tasks[key] == nil else { return }
            let id = s.nextID
            s.nextID += 1
            // The daemon's own work: not charged to the caller whose request started it.
            let task = Task { [weak self] in
                await ProviderRequests.$allowance.withValue(nil) { await self?.loop(key, provider: provider) }
                self?.state.withLock { s in
                    if s.tasks[key]?.id == id {
                        s.tasks[key] = nil
                        s.lastAsked[key] = nil
                    }
                }
            }
            s.tasks[key] = (id, task)
        }
    }

    /// Ends the background refreshes of one account, or of all (reload, stop).
    func stop(_ account: AccountKey? = nil) {
        let ended = state.withLock { s -> [Task<Void, Never>] in
            let keys = s.tasks.keys.filter { account == nil || $0.account == account }
            defer { for k in keys { s.tasks[k] = nil; s.lastAsked[k] = nil } }
            return keys.compactMap { s.tasks[$0]?.task }
        }
        for task in ended { task.cancel() }
    }

    private func loop(_ key: CacheKey, provider: Provider) async {
        var refreshedHere = false
        while !Task.isCancelled {
            guard let token = cache.lookup(key, now: clock.reading(), minimumLife: 0) else { return }
            let margin = Double(providers.refreshMargin)
            // A little before the margin: a quarter of it, at most 30 s. Counted from the
            // token's life on both clocks each time (`CachedToken.life(at:)`): a wall clock
            // stepped forward brings a JWT's exp nearer, boot time counts a suspend.
            let ahead = margin + min(30, margin / 4)
            // A provider whose tokens are due as soon as issued would be asked without pause.
            if refreshedHere && token.life(at: clock.reading()) <= ahead { return }
            while case let wait = token.life(at: clock.reading()) - ahead, wait > 0 {
                let step = min(Duration.seconds(wait), tick)
                do { try await Task.sleep(for: step) } catch { return }
            }
            let window = Double(provider.config.refreshAheadWindow)
            guard let asked = state.withLock({ $0.lastAsked[key] }), clock.boottime() - asked <= window else { return }
            do {
                _ = try await refresher.queue(for: key.account).run(key) { () async throws(BrokerError) -> CachedToken in
                    // A caller may have refreshed it while this one waited its turn.
                    if let current = self.cache.lookup(key, now: self.clock.reading(), minimumLife: 0),
                       current.deadline > token.deadline { return current }
                    return try await self.refresher.refresh(key, provider: provider)
                }
                refreshedHere = true
            } catch {
                // The next caller refreshes (or is served the cached token while the provider is down).
                logger.notice("background refresh failed", metadata: ["account": "\(key.account)", "error": "\(error.message)"])
                return
            }
        }
    }
}
