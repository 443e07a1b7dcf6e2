#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerProtocol
import TOML

/// Shell completion of `--provider` and `--resource` from config.toml, read here without
/// the daemon: the file authbrokerd reads when not given `--config` (``ConfigPath``).
///
/// ArgumentParser's completion scripts call `authctl ---completion …` when the user
/// presses Tab; these closures answer. A file that is missing or does not parse completes
/// nothing rather than printing an error into the user's command line.
enum Completions {
    /// `--provider`: the configured provider names.
    static var provider: CompletionKind {
        .custom { _, _, _ in
            ConfiguredNames.load()?.providers.map(\.name) ?? []
        }
    }

    /// `--resource`: the configured resources, of the provider named on the command line
    /// when there is one.
    static var resource: CompletionKind {
        .custom { words, _, _ in
            guard let names = ConfiguredNames.load() else { return [] }
            let chosen = providerNamed(in: words)
            return names.providers.filter { chosen == nil || $0.name == chosen }.flatMap(\.resources)
        }
    }

    /// The value of `--provider NAME` or `--provider=NAME` among `words`.
    static func providerNamed(in words: [String]) -> String? {
        var value: String?
        for (index, word) in words.enumerated() {
            if word == "--provider", index + 1 < words.count {
                value = words[index + 1]
            } else if word.hasPrefix("--provider=") {
                value = String(word.dropFirst("--provider=".count))
            }
        }
        return value.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// The provider names and resources of a config.toml.
struct ConfiguredNames: Equatable {
    struct Provider: Equatable {
        var name: String
        var resources: [String]
    }

    var providers: [Provider]

    /// The names in `text`, or nil when it is not TOML.
    init?(parsing text: String) {
        guard let root = try? TOMLTable(parsing: text) else { return nil }
        let table = root["providers"]?.table ?? TOMLTable()
        providers = table.keys.sorted().map { name in
            let resources = table[name]?.table?["resources"]?.array?.compactMap(\.string) ?? []
            return Provider(name: name, resources: resources)
        }
    }

    /// The names in the config file of this environment, or nil when it cannot be read.
    static func load(path: String = ConfigPath.resolve(environment: { getenv($0).map { String(cString: $0) } })) -> ConfiguredNames? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = fread(&buffer, 1, buffer.count, file)
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return ConfiguredNames(parsing: String(decoding: bytes, as: UTF8.self))
    }
}
