import BrokerProtocol
import Synchronization

/// Fans broker events out to subscribers (`events.subscribe`). Delivery is a plain call of
/// each subscriber's closure, which must not block: the server's closure hands the event to
/// its connection's event loop and drops a connection that does not read. With nobody
/// subscribed, `emit` costs one atomic load and builds no event.
public final class EventHub: Sendable {
    /// One subscriber: what it wants and how it is handed an event.
    struct Subscriber: Sendable {
        var providers: Set<String>?
        var kinds: Set<EventKind>
        var deliver: @Sendable (BrokerEvent) -> Void
    }

    private let subscribers = Mutex<[Int: Subscriber]>([:])
    private let count = Atomic<Int>(0)
    private let nextID = Atomic<Int>(1)

    public init() {}

    /// Registers a subscriber; nil filters mean all providers / all kinds. Returns its id
    /// for `unsubscribe`.
    public func subscribe(providers: Set<String>? = nil, kinds: Set<EventKind>? = nil,
                          _ deliver: @escaping @Sendable (BrokerEvent) -> Void) -> Int {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        let subscriber = Subscriber(providers: providers, kinds: kinds ?? Set(EventKind.allCases), deliver: deliver)
        subscribers.withLock { all in
            all[id] = subscriber
            count.store(all.count, ordering: .releasing)
        }
        return id
    }

    public func unsubscribe(_ id: Int) {
        subscribers.withLock { all in
            all[id] = nil
            count.store(all.count, ordering: .releasing)
        }
    }

    /// How many subscribers are registered.
    public var subscriberCount: Int { count.load(ordering: .acquiring) }

    /// Sends the event to every subscriber that wants it. The event is built only when
    /// someone is subscribed; closures are called outside the lock.
    func emit(_ event: @autoclosure () -> BrokerEvent) {
        guard count.load(ordering: .acquiring) > 0 else { return }
        let event = event()
        let targets = subscribers.withLock { all in
            all.values.filter { $0.kinds.contains(event.kind) && ($0.providers?.contains(event.provider) ?? true) }.map(\.deliver)
        }
        for deliver in targets { deliver(event) }
    }
}
