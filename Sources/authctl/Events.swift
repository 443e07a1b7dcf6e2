import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl events`: follows the daemon's events (events.subscribe) until interrupted.
struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Follow what the daemon does: refreshes, sign-ins, sign-outs, login_required, providers down and back.",
        discussion: """
            One line per event until Ctrl-C, for a shell prompt segment, a tray icon or a \
            script that must act when an account needs a new sign-in. No event carries a \
            token. With --json each line is the notification's params, as docs/protocol.md \
            describes them (a stable schema: ignore members you do not know).

              authctl events --kind login_required --json | while read -r e; do notify-send "$e"; done
            """
    )

    @Option(name: .customLong("provider"), help: ArgumentHelp("Only this provider's events (repeat for several).", valueName: "provider"),
            completion: Completions.provider)
    var providers: [String] = []

    @Option(name: .customLong("kind"), help: ArgumentHelp("Only events of this kind (repeat): \(EventKind.allCases.map(\.rawValue).joined(separator: ", ")).", valueName: "kind"),
            completion: .list(EventKind.allCases.map(\.rawValue)))
    var kinds: [String] = []

    @Flag(help: "Print each event as one JSON object per line.")
    var json = false

    func run() throws {
        let params = EventsSubscribeParams(providers: providers.isEmpty ? nil : providers, kinds: kinds.isEmpty ? nil : kinds)
        try DaemonCall.session(json: json) { broker throws(ClientError) -> Void in
            _ = try broker.subscribeEvents(params)
            while true {
                let event = try broker.nextEvent()
                Output.line(json ? try Output.json(event, oneLine: true) : Self.describe(event))
            }
        }
    }

    /// `12:00:01  token_refreshed  corp  alice  https://api.example.com  expires in 3600s (at 13:00:01)`.
    static func describe(_ event: BrokerEvent, now: Int64 = TimeText.now) -> String {
        var parts = [TimeText.localTime(now, sameDayAs: now), event.kind.rawValue, event.provider]
        if let account = event.account { parts.append(account) }
        if event.kind == .tokenRefreshed || event.resource != nil {
            parts.append(event.resource ?? "(default audience)")
        }
        if let scopes = event.scopes, !scopes.isEmpty { parts.append("scopes " + scopes.joined(separator: " ")) }
        if let expiresAt = event.expiresAt { parts.append("expires " + TimeText.expiry(expiresAt, now: now)) }
        return parts.map(Output.safe).joined(separator: "  ")
    }
}
