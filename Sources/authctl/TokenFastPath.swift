#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol

/// `authctl token` without ArgumentParser, for the common case.
///
/// `$(authctl token …)` runs before every `curl` of a script, so its start-up is the
/// command's cost. Building ArgumentParser's command tree for every subcommand is most of
/// that (docs/performance.md). This path reads only the plain, valid forms of `token`'s own
/// options and runs the very same code as `Token.run()`. Anything else — `--help`, an
/// unknown or repeated option, a missing or out-of-range value, `--json` with `--header` —
/// returns, and ArgumentParser handles it as before, with its own messages and exit status.
enum TokenFastPath {
    /// Runs `authctl token` and exits if the command line is plain; returns otherwise.
    ///
    /// Reads `argv` itself: `CommandLine.arguments` makes every word a String and the array
    /// of them first, a tenth of the process's instructions (docs/performance.md).
    static func runIfPlain(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard argc >= 2, let command = argv[1], strcmp(command, "token") == 0,
              var parsed = parse(Words(argc: Int(argc), argv: argv))
        else { return }
        if parsed.params.account == nil { parsed.params.accountHint = TokenOptions.environmentAccount }
        do {
            try Token.printToken(parsed.params, json: parsed.json, header: parsed.header)
        } catch {
            exit(error.rawValue)
        }
        exit(0)
    }

    struct Parsed {
        var params = TokenGetParams()
        var json = false
        var header = false
    }

    /// `argv[2...]`, each made a String when it is reached, as `CommandLine.arguments` does.
    struct Words: Sequence, IteratorProtocol {
        let argc: Int
        let argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
        var index = 2

        mutating func next() -> String? {
            guard index < argc, let word = argv[index] else { return nil }
            index += 1
            return String(cString: word)
        }
    }

    /// The arguments after `token`, or nil when they are not all plain and valid.
    static func parse(_ arguments: some Sequence<String>) -> Parsed? {
        var parsed = Parsed()
        var scopes: [String] = []
        var rest = arguments.makeIterator()
        while let argument = rest.next() {
            guard argument.hasPrefix("--") else { return nil }
            var name = argument
            var inline: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            switch name {
            case "--json", "--header":
                guard inline == nil else { return nil }
                if name == "--json" {
                    guard !parsed.json else { return nil }
                    parsed.json = true
                } else {
                    guard !parsed.header else { return nil }
                    parsed.header = true
                }
            case "--resource", "--scope", "--provider", "--account", "--min-ttl":
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard let next = rest.next(), !next.hasPrefix("-") else { return nil }
                    value = next
                }
                guard !value.isEmpty else { return nil }
                switch name {
                case "--resource":
                    guard parsed.params.resource == nil else { return nil }
                    parsed.params.resource = value
                case "--scope":
                    scopes.append(value)
                case "--provider":
                    guard parsed.params.provider == nil else { return nil }
                    parsed.params.provider = value
                case "--account":
                    guard parsed.params.account == nil else { return nil }
                    parsed.params.account = value
                default:
                    // Digits only: ArgumentParser's Int also reads "+5", which is left to it.
                    guard parsed.params.minTTL == nil,
                          value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                          let seconds = Int(value), TokenGetParams.minTTLRange.contains(seconds)
                    else { return nil }
                    parsed.params.minTTL = seconds
                }
            default:
                return nil
            }
        }
        guard !(parsed.json && parsed.header) else { return nil }
        let list = Token.scopeList(scopes)
        parsed.params.scopes = list.isEmpty ? nil : list
        return parsed
    }
}
