import BrokerProtocol

/// The events service: the `EventHub` every other service tells what happened (a refresh,
/// a sign-in, a provider going away), and the registration of `events.subscribe` and
/// `events.unsubscribe`, which the server serves on the connection itself (the connection
/// is the subscriber), filtering each event through the caller policy (`CallerGate.shows`).
///
/// Owns: the hub and its subscribers.
public final class EventsService: RegistersMethods, Sendable {
    public let hub: EventHub

    public init(hub: EventHub = EventHub()) {
        self.hub = hub
    }

    public func register(into registrar: inout some MethodRegistrar) {
        let reason = "a subscriber hears of an event only when the caller policy would grant it a token of the event's resource (or some token of its provider): each event is filtered through CallerGate.shows for the caller identified at subscribe"
        registrar.add(ConnectionMethodSpec(.eventsSubscribe, openReason: reason))
        registrar.add(ConnectionMethodSpec(.eventsUnsubscribe, openReason: "ends this connection's own subscription; reveals nothing"))
    }
}
