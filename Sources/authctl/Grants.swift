import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl grants`: the leases the user gave in answer to `confirm = true` questions
/// ("Allow for N minutes"), and `authctl grants revoke` to end them.
struct Grants: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the leases you gave in answer to confirm questions (\"Allow for N minutes\").",
        discussion: """
            A lease lets one program (its executable's file, whichever process runs it; for \
            a forwarded socket, the one ssh process carrying it) have tokens for the \
            resource it asked for without a question, until it expires. Leases live in \
            authbrokerd's memory only; they also end when you sign out of the provider, when \
            a reload changes the [[allow]] rule they were given under, and with \
            `authctl grants revoke`.
            """,
        subcommands: [List.self, Revoke.self],
        defaultSubcommand: List.self
    )

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the leases in force (the default).")

        @Flag(help: "Print authbrokerd's answer (grants.list) as JSON (docs/cli-json.md).")
        var json = false

        func run() throws {
            let result = try DaemonCall.session(json: json) { broker throws(ClientError) -> GrantsListResult in
                try broker.call(.grantsList, NoParams(), as: GrantsListResult.self)
            }
            if json {
                Output.line(try Output.json(result))
                return
            }
            for line in Grants.table(result.grants) { Output.line(line) }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "End a lease (by the ID `authctl grants` shows) or all of them: the program is asked again."
        )

        @Argument(help: "The lease's ID, as `authctl grants` lists it.")
        var id: String?

        @Flag(help: "End every lease.")
        var all = false

        @Flag(help: "Print authbrokerd's answer (grants.revoke) as JSON: revoked, the number ended.")
        var json = false

        func validate() throws {
            guard (id != nil) != all else { throw ValidationError("give a lease's ID or --all, not both and not neither") }
        }

        func run() throws {
            let params = all ? GrantsRevokeParams(all: true) : GrantsRevokeParams(id: id)
            let result = try DaemonCall.session(json: json) { broker throws(ClientError) -> GrantsRevokeResult in
                try broker.call(.grantsRevoke, params, as: GrantsRevokeResult.self)
            }
            if let id, result.revoked == 0 {
                throw Failure.report("no lease has the ID \(Output.safe(id)) (it may have expired): `authctl grants` lists those in force",
                                     status: .badRequest, json: json)
            }
            if json {
                Output.line(try Output.json(result))
            } else {
                Output.line(result.revoked == 1 ? "Ended 1 lease." : "Ended \(result.revoked) leases.")
            }
        }
    }

    /// The leases as a table: ID, program, what for, and until when.
    static func table(_ grants: [GrantInfo], now: Int64 = TimeText.now) -> [String] {
        guard !grants.isEmpty else { return ["No leases: a confirm question's \"Allow for …\" gives one."] }
        let rows = grants.map { g -> [String] in
            let program = g.forwarded ? "\(g.program) (pid \(g.pid.map(String.init) ?? "?"), forwarded socket)" : g.program
            let what = [g.resource ?? "the default audience", g.audience].compactMap { $0 }.joined(separator: " and ")
            return [g.id, program, g.provider, what, TimeText.expiry(Int64(g.expiresAt), now: now)].map(Output.safe)
        }
        return Output.table([["ID", "PROGRAM", "PROVIDER", "TOKENS FOR", "ENDS"]] + rows)
    }
}
