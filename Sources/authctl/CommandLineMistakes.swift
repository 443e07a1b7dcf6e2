#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser

/// What authctl says about a command line it cannot run, before and after ArgumentParser
/// reads it: a mistyped command gets a suggestion, and with `--json` every usage error is
/// the JSON error object of docs/cli-json.md.
enum CommandLineMistakes {
    /// The names a first word may be: the subcommands, and ArgumentParser's `help`.
    static var commandNames: [String] {
        AuthCtl.configuration.subcommands.map { $0._commandName } + ["help"]
    }

    /// The sentence for a first word that is no command ("unknown command 'tokne'. Did you
    /// mean 'token'?"), or nil when it is one, or an option, or absent.
    static func unknownCommand(_ arguments: [String], names: [String] = commandNames) -> String? {
        guard let word = arguments.first, !word.hasPrefix("-"), !names.contains(word) else { return nil }
        let shown = Output.safe(word)
        let close = suggestions(for: word, among: names)
        guard !close.isEmpty else {
            return "unknown command '\(shown)': `authctl --help` lists the commands"
        }
        return "unknown command '\(shown)'. Did you mean " + close.map { "'\($0)'" }.joined(separator: " or ") + "?"
    }

    /// The names within two edits of `word` (a transposed pair counts as one edit), the
    /// closest first; or those that `word` starts, for an abbreviation.
    static func suggestions(for word: String, among names: [String]) -> [String] {
        let typed = Array(word.lowercased())
        let scored = names.map { ($0, distance(typed, Array($0))) }
        let best = scored.map(\.1).min() ?? Int.max
        if best <= min(2, max(1, typed.count / 2)) {
            return scored.filter { $0.1 == best }.map(\.0)
        }
        guard typed.count >= 2 else { return [] }
        return names.filter { $0.hasPrefix(word.lowercased()) }
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and
    /// transpositions of neighbours, each one edit.
    static func distance(_ a: [Character], _ b: [Character]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }

    /// Parses and runs the command line as ArgumentParser's `main` does, with the two
    /// differences above.
    static func run(_ arguments: [String]) -> Never {
        let json = Failure.wantsJSON(arguments)
        if let sentence = unknownCommand(arguments) {
            exit(Failure.report(sentence, status: .usage, json: json).rawValue)
        }
        do {
            var command = try AuthCtl.parseAsRoot(arguments)
            try command.run()
            exit(0)
        } catch {
            // ExitCode: the command has reported its failure already. Help, version and
            // completion answers exit 0 and are printed as ArgumentParser prints them.
            let status = AuthCtl.exitCode(for: error)
            guard json, !(error is ExitCode), status != .success else { AuthCtl.exit(withError: error) }
            let known = ExitStatus(rawValue: status.rawValue) ?? .failure
            exit(Failure.report(AuthCtl.message(for: error), status: known, json: true).rawValue)
        }
    }
}
