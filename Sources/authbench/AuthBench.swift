#if canImport(Glibc)
import Glibc
#endif

/// `authbench`: the load generator and timer behind scripts/bench (docs/performance.md).
///
/// Glibc only, on purpose: it builds in seconds beside the daemon and adds nothing of its
/// own to what it measures. Each subcommand prints one JSON object on stdout.
///
///     authbench load --socket PATH --mode persistent|connect --connections N --seconds S --line JSON
///                    [--framing line|close]   (close: oidc-agent's answer ends at end of stream)
///                    [--others "JSON\nJSON…"] (each sent in turn after --line on each connection)
///     authbench burst --socket PATH --count N --line JSON
///     authbench spawn --runs N -- COMMAND ARGS…
///     authbench ready --socket PATH --log FILE -- COMMAND ARGS…
///     authbench quiet --quiet S --rounds N --socket0 PATH --line0 JSON [--framing0 close]
///                     [--schedstat0 "/proc/PID/task/TID/schedstat …"]   (the server's threads)
///                     [--command1 "PROGRAM ARGS…"] …   (targets 0, 1, … in the same rounds)
@main
struct AuthBench {
    static func main() {
        var args = Array(CommandLine.arguments.dropFirst())
        guard let sub = args.first else { usage() }
        args.removeFirst()
        var options: [String: String] = [:]
        var command: [String] = []
        while let a = args.first {
            args.removeFirst()
            if a == "--" {
                command = args
                break
            }
            guard a.hasPrefix("--"), let value = args.first else { usage() }
            args.removeFirst()
            options[String(a.dropFirst(2))] = value
        }
        func number(_ key: String, _ fallback: Double) -> Double { options[key].flatMap(Double.init) ?? fallback }
        func line() -> [UInt8] { Array((options["line"] ?? "").utf8) + [UInt8(ascii: "\n")] }
        do throws(BenchError) {
            let socket = options["socket"] ?? ""
            let text: String
            switch sub {
            case "load":
                guard let mode = Load.Mode(rawValue: options["mode"] ?? "persistent"),
                      let framing = Load.Framing(rawValue: options["framing"] ?? "line") else { usage() }
                text = try Load(socket: socket, mode: mode, connections: Int(number("connections", 1)),
                                seconds: number("seconds", 2), warmup: number("warmup", 0.3),
                                line: framing == .line ? line() : Array((options["line"] ?? "").utf8), framing: framing,
                                others: (options["others"] ?? "").split(separator: "\n").map { Array($0.utf8) + [UInt8(ascii: "\n")] }).run()
            case "burst":
                text = try Burst(socket: socket, count: Int(number("count", 1000)), line: line(), timeout: number("timeout", 60)).run()
            case "spawn":
                guard !command.isEmpty else { usage() }
                text = try Spawn.timing(command, runs: Int(number("runs", 100)), expect: Int32(number("status", 0)))
            case "ready":
                guard !command.isEmpty, let log = options["log"] else { usage() }
                text = try Spawn.ready(command, socket: socket, log: log, timeout: number("timeout", 20))
            case "quiet":
                var targets: [Quiet.Target] = []
                while options["socket\(targets.count)"] != nil || options["command\(targets.count)"] != nil {
                    let i = targets.count
                    guard let framing = Load.Framing(rawValue: options["framing\(i)"] ?? "line") else { usage() }
                    let text = options["line\(i)"] ?? ""
                    targets.append(Quiet.Target(
                        socket: options["socket\(i)"] ?? "", line: Array(text.utf8) + (framing == .line ? [10] : []),
                        framing: framing, command: (options["command\(i)"] ?? "").split(separator: " ").map(String.init),
                        schedstat: (options["schedstat\(i)"] ?? "").split(separator: " ").map(String.init)))
                }
                guard !targets.isEmpty else { usage() }
                text = try Quiet(targets: targets, quiet: number("quiet", 7), rounds: Int(number("rounds", 5)),
                                 gap: number("gap", 0.3)).run()
            default:
                usage()
            }
            print(text)
        } catch {
            complain("authbench: \(error.description)\n")
            exit(1)
        }
    }

    /// Writes to stderr with write(2): `stderr` is a C global Swift 6 will not touch.
    static func complain(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    static func usage() -> Never {
        complain("usage: authbench load|burst|spawn|ready [--option value]… [-- command…] (see scripts/bench)\n")
        exit(64)
    }
}
