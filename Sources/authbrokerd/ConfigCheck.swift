#if canImport(Glibc)
import Glibc
#endif
import BrokerCore

/// `authbrokerd --check-config [--config PATH]`: reads and checks the file as a start or a
/// reload would (`ConfigLoader`), says whether it is valid, and starts nothing: no socket,
/// no store, no provider asked. For a file edited before `systemctl --user reload`, where a
/// mistake would otherwise show only in the journal (the running configuration stays).
enum ConfigCheck {
    /// The exit status: 0 valid ("PATH is valid: N providers" on stdout, and on stderr a
    /// warning per `[[allow]]` rule that can never match, as the daemon logs them), 78
    /// (EX_CONFIG, as the daemon's own refusal) with the error sentence on stderr.
    static func run(path given: String?) -> Int32 {
        let env: (String) -> String? = { getenv($0).map { String(cString: $0) } }
        let path = given ?? ConfigLoader.defaultPath(environment: env)
        let config: BrokerConfig
        do {
            config = try ConfigLoader.load(path: path)
        } catch {
            writeStderr("authbrokerd: configuration error: \(error)\n")
            return 78
        }
        for rule in config.policy.rules where !rule.forwarded {
            if let why = RuleFileCheck.problem(with: rule.executable, home: env("HOME")) {
                writeStderr("authbrokerd: warning: the [[allow]] rule for \(rule.executable) can never match: \(why)\n")
            }
        }
        let count = config.configuredProviders.count
        print("\(path) is valid: \(count) provider\(count == 1 ? "" : "s")")
        return 0
    }
}
