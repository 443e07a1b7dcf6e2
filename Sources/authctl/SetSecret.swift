#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl set-secret`: keeps a confidential client's secret in the Secret Service.
struct SetSecret: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-secret",
        abstract: "Store a provider's client secret in the Secret Service, so config.toml holds none.",
        discussion: """
            Reads the secret from standard input (the first line; not echoed on a terminal), \
            so it never appears in the shell's history or the process list:

              authctl set-secret --provider corp < secret.txt
            """)

    @OptionGroup var target: ProviderOption
    var provider: String? { target.provider }

    @Flag(help: "Print the result as JSON: provider, stored (docs/cli-json.md).")
    var json = false

    func run() throws {
        guard let secret = Self.readSecret(prompt: "Client secret: ") else {
            throw Failure.report("no secret on standard input: pipe it in, e.g. `authctl set-secret --provider NAME < file`",
                                 status: .usage, json: json)
        }
        let params = SetSecretParams(provider: provider, clientSecret: secret)
        let result = try DaemonCall.session(json: json) { broker throws(ClientError) -> SetSecretResult in
            try broker.call(.providerSetSecret, params, as: SetSecretResult.self)
        }
        Output.line(json ? try Output.json(result) : Self.sentence(result))
    }

    /// Where the secret went, as `[daemon] store` says: only secret-service is the Secret
    /// Service, and a secret in memory is gone with the daemon.
    static func sentence(_ result: SetSecretResult) -> String {
        let name = Output.safe(result.provider)
        switch result.store {
        case "kernel-keyring":
            return "Stored the client secret of \(name) in the kernel keyring (store = \"kernel-keyring\"): set it again after a reboot."
        case "memory":
            return "Kept the client secret of \(name) in authbrokerd's memory only (store = \"memory\"): set it again after the daemon restarts."
        default:
            return "Stored the client secret of \(name) in the Secret Service."
        }
    }

    /// The first line of stdin, with echo off when stdin is a terminal.
    static func readSecret(prompt: String) -> String? {
        let tty = isatty(0) == 1
        var saved = termios()
        if tty {
            Output.note(prompt)
            tcgetattr(0, &saved)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSANOW, &quiet)
        }
        defer { if tty { tcsetattr(0, TCSANOW, &saved) } }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(0, &byte, 1) == 1, byte != 0x0A, bytes.count < 8192 { bytes.append(byte) }
        let line = String(decoding: bytes, as: UTF8.self)
        return line.isEmpty ? nil : line
    }
}
