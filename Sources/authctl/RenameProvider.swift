import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl rename-provider OLD NEW`: a provider found by discovery gets a name of the user's.
struct RenameProvider: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename-provider",
        abstract: "Rename a provider found by discovery (its accounts move with it).",
        discussion: """
            A resource no configured provider lists leads to the provider its metadata \
            names, under a name made from the server's host (`authctl status` lists it). \
            Give it a name of your own for --provider; its client and sign-ins keep \
            working. Providers of config.toml are renamed there.

              authctl rename-provider login.example.com work
            """
    )

    @Argument(help: "The provider's name now.")
    var provider: String

    @Argument(help: "Its new name: letters, digits, dots, colons, hyphens, underscores.")
    var name: String

    @Flag(help: "Print authbrokerd's answer as JSON.")
    var json = false

    func run() throws {
        let text = try DaemonCall.session(json: json) { broker throws(ClientError) -> String in
            let result = try broker.call(.providerRename, ProviderRenameParams(provider: provider, name: name), as: ProviderRenameResult.self)
            if json { return try Output.json(result) }
            let moved = result.accounts == 1 ? "1 account" : "\(result.accounts) accounts"
            return "\(Output.safe(provider)) is \(Output.safe(result.provider)) now (\(moved) moved)."
        }
        Output.line(text)
    }
}
