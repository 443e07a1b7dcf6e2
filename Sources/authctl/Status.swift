import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl status`: the daemon, its providers, accounts and cached tokens.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the daemon, its providers, accounts and cached tokens with their expiry.",
        discussion: """
            A token's value is never shown, only what it is for and when it expires.

            When authbrokerd is not running (no socket, nothing listening on it, or a \
            socket-activated daemon that fails to start), status says so and how to start \
            it, and exits with status \(ExitStatus.daemonUnavailable.rawValue); with --json \
            it prints {"running": false, "reason": …, "message": …} on stdout \
            (docs/cli-json.md).
            """
    )

    @Flag(help: "Print authbrokerd's answer (daemon.status) as JSON, with \"running\": true.")
    var json = false

    func run() throws {
        switch DaemonCall.attempt({ broker throws(ClientError) in try broker.status() }) {
        case .success(let status):
            let lines = json ? [try Output.json(Output.Beside(key: "running", value: true, body: status))] : Self.report(status)
            for line in lines { Output.line(line) }
        case .failure(let error):
            guard let down = NotRunning(error) else { throw Failure.report(error, json: json) }
            if json {
                Output.line(try Output.json(down))
            } else {
                Output.error(down.message)
            }
            throw ExitCode(ExitStatus.daemonUnavailable.rawValue)
        }
    }

    /// The human report: the daemon first, then one block per provider.
    static func report(_ status: DaemonStatusResult, now: Int64 = TimeText.now) -> [String] {
        let c = status.counters
        var lines = ["authbrokerd \(Output.safe(status.version)), pid \(status.pid), up \(TimeText.duration(seconds: Int64(status.uptimeSeconds)))"]
        var rows = [["store", Output.safe(status.store)]]
        if let unavailable = status.storeUnavailable {
            // Its accounts are not loaded yet: the daemon loads them once the store answers.
            rows[0][1] += " — unavailable (\(Output.safe(unavailable.reason))): \(Output.safe(unavailable.message)); accounts load as soon as it can be read"
        }
        if let refused = status.reloadRefused {
            rows.append(["last reload", "refused \(TimeText.duration(seconds: max(0, now - refused.at))) ago, still running on the previous configuration: \(Output.safe(refused.message))"])
        }
        lines += Output.table(rows + [
            ["socket", Output.safe(status.socket)],
            ["requests", "\(c.requests) (token \(c.tokenRequests), cache hits \(c.cacheHits), refreshes \(c.refreshes), provider errors \(c.providerErrors), errors \(c.errors))"],
        ], indent: "  ")
        if status.providers.isEmpty {
            lines += ["", "No providers configured: add one under [providers.NAME] in config.toml."]
        }
        for provider in status.providers {
            lines += [""] + block(provider, now: now, storeLoaded: status.storeUnavailable == nil)
        }
        return lines
    }

    private static func block(_ provider: ProviderStatus, now: Int64, storeLoaded: Bool) -> [String] {
        var lines = ["provider \(Output.safe(provider.name))"]
        lines += Output.table([
            ["issuer", Output.safe(provider.issuer)],
            ["client id", Output.safe(provider.clientID)],
        ], indent: "  ")
        if provider.accounts.isEmpty && !storeLoaded {
            lines.append("  no account loaded yet: the secret store cannot be read (see store above)")
        } else if provider.accounts.isEmpty {
            lines.append("  no account: sign in with `authctl login --provider \(Output.safe(provider.name))`")
        }
        for entry in provider.accounts {
            let account = entry.account
            let shown = account.shownName
            let name = shown == account.subject ? "subject \(shown)" : "\(shown) (subject \(account.subject))"
            lines.append("  account \(Output.safe(name)): \(Output.safe(State.describe(account)))")
            if let unsaved = account.unsaved { lines.append("    \(Output.safe(unsaved))") }
            if entry.tokens.isEmpty {
                lines.append("    no cached token")
                continue
            }
            let rows = entry.tokens.map { token in
                [
                    Output.safe(token.resource ?? "(default audience)"),
                    Output.safe(token.scopes.isEmpty ? "-" : token.scopes.joined(separator: " ")),
                    TimeText.expiry(token.expiresAt, now: now),
                ]
            }
            lines += Output.table([["RESOURCE", "SCOPES", "EXPIRES"]] + rows, indent: "    ")
        }
        return lines
    }
}
