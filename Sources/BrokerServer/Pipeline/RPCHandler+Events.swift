import BrokerCore
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore

/// `events.subscribe` / `events.unsubscribe`: the connection itself is the subscriber, so
/// these are served here rather than through the method table.
extension RPCHandler {
    func subscribe(_ context: ChannelHandlerContext, method: String, line: RequestLine, id: RequestID, answer: Bool) {
        guard let events = rules.server.events else {
            return fail(context, id, RPCError(.methodNotFound, "this server does not send events"), answer: answer)
        }
        if let subscription { events.unsubscribe(subscription) }
        subscription = nil
        if method == RPCMethod.eventsUnsubscribe.rawValue {
            if answer { write(context, codec.success(id, EventsSubscribeResult(subscribed: false, kinds: []))) }
            return
        }
        let params: EventsSubscribeParams
        do {
            params = try codec.decoder.decode(RequestParams<EventsSubscribeParams>.self, from: line.data).params ?? EventsSubscribeParams()
        } catch {
            return fail(context, id, RPCError(.invalidParams, "invalid params for events.subscribe: \(MethodTable.describe(error))"), answer: answer)
        }
        var kinds: Set<EventKind>?
        if let names = params.kinds {
            var wanted = Set<EventKind>()
            for name in names {
                guard let kind = EventKind(rawValue: name) else {
                    let known = EventKind.allCases.map(\.rawValue).joined(separator: ", ")
                    return fail(context, id, RPCError(.invalidParams, "there is no event kind \"\(name.prefix(64))\": choose from \(known)"), answer: answer)
                }
                wanted.insert(kind)
            }
            kinds = wanted
        }
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        // Under rules a subscriber hears only of what it may get itself: other programs'
        // resources and when they are refreshed are not its to know. Identified once, here;
        // the rules are read for each event (a reload may bring or lift them).
        let gate = table.gate
        let caller = self.caller.peer.flatMap { gate.caller($0.identify) }
        let answers = self.caller.answers
        subscription = events.subscribe(providers: params.providers.map(Set.init), kinds: kinds) { event in
            guard gate.shows(event, to: caller, answers: answers) else { return }
            loop.execute {
                let (handler, context) = bound.value
                handler.send(context, event)
            }
        }
        let sent = (kinds ?? Set(EventKind.allCases)).map(\.rawValue).sorted()
        if answer { write(context, codec.success(id, EventsSubscribeResult(subscribed: true, kinds: sent))) }
    }

    /// Writes one `event` notification. A subscriber that does not read is dropped, not
    /// buffered for: once its unwritten bytes pass the channel's high-water mark (64 KiB,
    /// on top of what the kernel's socket buffer holds) the connection is closed.
    private func send(_ context: ChannelHandlerContext, _ event: BrokerEvent) {
        guard let subscription, context.channel.isActive else { return }
        guard context.channel.isWritable else {
            rules.server.events?.unsubscribe(subscription)
            self.subscription = nil
            rules.server.counters.errors.increment()
            rules.server.logger.notice("an event subscriber stopped reading; its connection is closed")
            context.close(promise: nil)
            return
        }
        guard let data = try? codec.encoder.encode(EventNotification(event)) else { return }
        write(context, data)
    }
}
