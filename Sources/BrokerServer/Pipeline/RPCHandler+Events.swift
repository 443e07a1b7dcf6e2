import BrokerCore
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore

/// `events.subscribe` / `events.unsubscribe`: the method table reads the request and asks
/// the caller policy, as for every method, and answers with the change
/// (`Reply.subscription`); the connection carries it out, since it is the subscriber.
extension RPCHandler {
    /// Subscribes the connection (in place of any subscription it had) or ends its
    /// subscription, then writes `answer` (nil: a notification, not answered).
    func carryOut(_ context: ChannelHandlerContext, _ change: SubscriptionChange, answer: Data?, id: RequestID) {
        guard let events = rules.server.events else {
            return fail(context, id, RPCError(.methodNotFound, "this server does not send events"), answer: answer != nil)
        }
        if let subscription { events.unsubscribe(subscription) }
        subscription = nil
        if case .subscribe(let providers, let kinds) = change {
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            // Under rules a subscriber hears only of what it may get itself: other programs'
            // resources and when they are refreshed are not its to know. Identified once, here;
            // the rules are read for each event (a reload may bring or lift them).
            let gate = table.gate
            let caller = self.caller.peer.flatMap { gate.caller($0.identify) }
            let answers = self.caller.answers
            subscription = events.subscribe(providers: providers, kinds: kinds) { event in
                guard gate.shows(event, to: caller, answers: answers) else { return }
                loop.execute {
                    let (handler, context) = bound.value
                    handler.send(context, event)
                }
            }
        }
        if let answer { write(context, answer) }
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
