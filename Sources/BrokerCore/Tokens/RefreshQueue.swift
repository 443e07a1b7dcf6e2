import Synchronization

/// Which connection a request came from, so an account's refresh queue can take turns
/// between connections. The server sets it around each request's work (a task-local value,
/// so `TokensService.token` needs no extra parameter); 0 is the daemon's own work.
public enum RequestOrigin {
    @TaskLocal public static var current: UInt64 = 0

    private static let counter = Atomic<UInt64>(0)

    /// A new origin, one per connection.
    public static func next() -> UInt64 {
        counter.wrappingAdd(1, ordering: .relaxed).newValue
    }
}

/// Serialises the refreshes of one account (one refresh token).
///
/// Providers that rotate refresh tokens treat a second use of the same refresh token as
/// theft and revoke the whole grant, so refreshes of one account never overlap:
/// - concurrent requests for the same cache key share one refresh;
/// - requests for other keys of the same account wait their turn, and each uses the refresh
///   token the previous one left behind.
///
/// Turns go round the connections (`RequestOrigin`): first come first served within one
/// connection, one turn per connection in the round. A connection that asks for thousands
/// of keys makes only itself wait behind them; another caller's refresh runs next.
actor RefreshQueue {
    private var inflight: [CacheKey: (id: UInt64, task: Task<CachedToken, any Error>)] = [:]
    private var nextID: UInt64 = 0
    /// True while a refresh (or an exclusive operation) runs.
    private var busy = false
    /// Waiting turns per origin, first come first served.
    private var waiting: [UInt64: FIFO<CheckedContinuation<Void, Never>>] = [:]
    /// Origins with waiting turns, in the order their next turn comes.
    private var round = FIFO<UInt64>()

    /// Turns waiting now (for tests).
    var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } }
    /// Callers that joined a refresh in flight so far (for tests).
    private(set) var joins = 0

    /// How long a caller waits for its refresh, and what it hears when that passes first.
    /// The refresh itself goes on (`Refresher.lateAnswerWindow`): a provider that answers
    /// late still gets its rotated refresh token kept, and the account's next refreshes
    /// wait for it in this queue instead of sending the refresh token it spent.
    struct CallerWait: Sendable {
        var seconds: Double
        var late: BrokerError
    }

    func run(_ key: CacheKey, origin: UInt64 = RequestOrigin.current, waiting wait: CallerWait? = nil,
             _ operation: @escaping @Sendable () async throws(BrokerError) -> CachedToken) async throws(BrokerError) -> CachedToken {
        let task: Task<CachedToken, any Error>
        let joined = inflight[key] != nil
        if let shared = inflight[key] {
            task = shared.task
            joins += 1
        } else {
            nextID &+= 1
            let id = nextID
            task = Task {
                await self.turn(origin)
                let result: Result<CachedToken, BrokerError>
                if Task.isCancelled {
                    // `cancelAll` (the daemon stops, the account signs out): a refresh that has
                    // not started is not sent.
                    result = .failure(.internalError("the refresh was cancelled because authbrokerd is stopping or the account signed out: ask again"))
                } else {
                    do throws(BrokerError) {
                        result = .success(try await operation())
                    } catch {
                        result = .failure(error)
                    }
                }
                // Here, not by the caller: a caller that stopped waiting must not let the
                // next one start a second refresh of the key beside this one.
                if self.inflight[key]?.id == id { self.inflight[key] = nil }
                self.done()
                return try result.get()
            }
            inflight[key] = (id, task)
        }
        let result: Result<CachedToken, any Error>
        if let wait {
            guard let answered = await Self.result(of: task, within: wait.seconds) else { throw wait.late }
            result = answered
        } else {
            result = await task.result
        }
        switch result {
        case .success(let token): return token
        case .failure(BrokerError.providerRequestsSpent) where joined:
            // The caller that started the shared refresh had spent its allowance of
            // requests to the provider (`ProviderRequests`); this one may still have its own.
            return try await run(key, origin: origin, waiting: wait, operation)
        case .failure(let error as BrokerError): throw error
        case .failure: throw BrokerError.internalError("a refresh failed unexpectedly")
        }
    }

    /// True while a refresh (or an exclusive operation) runs or waits its turn.
    var isBusy: Bool { busy || !inflight.isEmpty }

    /// Cancels every refresh of the account in flight or waiting (the daemon stops, the
    /// account signs out): one
    /// waiting for a provider's answer stops reading it. True when there was one.
    func cancelAll() -> Bool {
        for entry in inflight.values { entry.task.cancel() }
        return !inflight.isEmpty
    }

    /// `task`'s result, or nil when `seconds` pass first (the task runs on).
    private static func result(of task: Task<CachedToken, any Error>, within seconds: Double) async -> Result<CachedToken, any Error>? {
        let answer = FirstAnswer()
        return await withCheckedContinuation { (continuation: CheckedContinuation<Result<CachedToken, any Error>?, Never>) in
            answer.set(continuation)
            let timer = Task {
                guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
                answer.resume(nil)
            }
            Task {
                let result = await task.result
                timer.cancel()
                answer.resume(result)
            }
        }
    }

    /// Runs `operation` in turn with the refreshes, never beside one (store writes of the
    /// account's refresh token go through here too, so an older write can never land last).
    func exclusive<T: Sendable>(_ operation: @escaping @Sendable () async -> T) async -> T {
        await turn(0)
        let value = await operation()
        done()
        return value
    }

    /// Returns when it is `origin`'s turn to run one operation.
    private func turn(_ origin: UInt64) async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if waiting[origin] == nil {
                waiting[origin] = FIFO()
                round.append(origin)
            }
            waiting[origin]?.append(continuation)
        }
    }

    /// Hands the turn to the next origin in the round (busy stays true), or frees it.
    private func done() {
        guard let origin = round.popFirst(), let next = waiting[origin]?.popFirst() else {
            busy = false
            return
        }
        if waiting[origin]?.isEmpty ?? true {
            waiting[origin] = nil
        } else {
            round.append(origin)
        }
        next.resume()
    }
}

/// A first-in first-out queue over an array: O(1) appends and removals from the front.
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        head += 1
        // Drop the consumed front once it is half the storage.
        if head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }
}

/// One waiter's continuation, resumed by whichever comes first: the refresh's result or
/// the caller's deadline.
private final class FirstAnswer: Sendable {
    private let slot = Mutex<CheckedContinuation<Result<CachedToken, any Error>?, Never>?>(nil)

    func set(_ continuation: CheckedContinuation<Result<CachedToken, any Error>?, Never>) {
        slot.withLock { $0 = continuation }
    }

    func resume(_ result: Result<CachedToken, any Error>?) {
        slot.withLock { slot in
            defer { slot = nil }
            return slot
        }?.resume(returning: result)
    }
}
