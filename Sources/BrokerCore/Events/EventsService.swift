import BrokerProtocol

/// The events service: the `EventHub` every other service tells what happened (a refresh,
/// a sign-in, a provider going away), and the registration of `events.subscribe` and
/// `events.unsubscribe`, which the connection they come on carries out (it is the
/// subscriber: `MethodSpec.Answer.subscription`), filtering each event through the caller
/// policy (`CallerGate.shows`).
///
/// Owns: the hub and its subscribers.
public final class EventsService: RegistersMethods, Sendable {
    public let hub: EventHub

    public init(hub: EventHub = EventHub()) {
        self.hub = hub
    }

    public func register(into registrar: inout some MethodRegistrar) {
        let reason = "a subscriber hears of an event only when the caller policy would grant it a token of the event's resource (or some token of its provider): each event is filtered through CallerGate.shows for the caller identified at subscribe"
        registrar.add(MethodSpec(
            .eventsSubscribe, empty: EventsSubscribeParams(), access: .open(reason),
            answer: .subscription { p throws(BrokerError) in try Self.subscription(p) }))
        registrar.add(MethodSpec(
            .eventsUnsubscribe, empty: NoParams(), access: .open("ends this connection's own subscription; reveals nothing"),
            answer: .subscription { _ in (.unsubscribe, EventsSubscribeResult(subscribed: false, kinds: [])) }))
    }

    /// What `events.subscribe` asks for, and its answer: the kinds it will be sent. An
    /// unknown kind is refused with the kinds there are.
    static func subscription(_ params: EventsSubscribeParams) throws(BrokerError) -> (SubscriptionChange, EventsSubscribeResult) {
        var kinds: Set<EventKind>?
        if let names = params.kinds {
            var wanted = Set<EventKind>()
            for name in names {
                guard let kind = EventKind(rawValue: name) else {
                    let known = EventKind.allCases.map(\.rawValue).joined(separator: ", ")
                    throw BrokerError.invalidRequest(message: "there is no event kind \"\(name.prefix(64))\": choose from \(known)")
                }
                wanted.insert(kind)
            }
            kinds = wanted
        }
        let sent = (kinds ?? Set(EventKind.allCases)).map(\.rawValue).sorted()
        return (.subscribe(providers: params.providers.map(Set.init), kinds: kinds), EventsSubscribeResult(subscribed: true, kinds: sent))
    }
}
