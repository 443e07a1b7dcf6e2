#if canImport(Glibc)
import Glibc
#endif

/// The occasional request: one request on a new connection after every target has been
/// left alone for `quiet` seconds, as a `git push` or a script run every few minutes meets
/// the daemon. Several targets (the daemon, the echo floor, oidc-agent) are measured in the
/// same rounds so that they see the same quiet and the same machine.
///
/// Each round sleeps `quiet` seconds, then asks each target once, in an order that rotates
/// from round to round (the first request of a round also wakes the CPU from its idle
/// state); a target's own quiet is `quiet` plus the few hundred milliseconds the others
/// took. Between two targets it sleeps `gap` seconds, so that the next one starts from an
/// idle CPU too rather than from its predecessor's warm caches.
struct Quiet {
    struct Target {
        let socket: String
        /// The request; with `.line` framing `\n`-terminated.
        let line: [UInt8]
        let framing: Load.Framing
        /// Instead of a request on the socket: a whole process, exec to exit.
        let command: [String]
    }

    let targets: [Target]
    let quiet: Double
    let rounds: Int
    var gap: Double = 0.3

    func run() throws(BenchError) -> String {
        var samples = [[UInt64]](repeating: [], count: targets.count)
        for round in 0..<rounds {
            sleep(seconds: quiet)
            for k in 0..<targets.count {
                let i = (k + round) % targets.count
                if k > 0 { sleep(seconds: gap) }
                samples[i].append(try once(targets[i]))
            }
        }
        var out = "{\"quiet_s\":\(quiet),\"rounds\":\(rounds),\"targets\":["
        for (i, times) in samples.enumerated() {
            let s = LatencySummary(nanos: times)
            var line = JSONLine()
            line.add("p50_us", s.p50)
            line.add("max_us", Double(times.max() ?? 0) / 1000)
            line.add("min_us", Double(times.min() ?? 0) / 1000)
            out += (i > 0 ? "," : "") + line.text
        }
        return out + "]}"
    }

    /// One request on a new connection (or one process), timed from connect to the whole answer.
    private func once(_ target: Target) throws(BenchError) -> UInt64 {
        if !target.command.isEmpty {
            let t0 = Clock.nanos()
            let status = Spawn.wait(try Spawn.start(target.command, output: nil))
            guard status == 0 else { throw BenchError("\(target.command[0]) exited with status \(status)") }
            return Clock.nanos() - t0
        }
        let t0 = Clock.nanos()
        let fd = try UnixClient.connect(target.socket)
        defer { close(fd) }
        try UnixClient.send(fd, target.line)
        var reader = LineReader()
        let answer: [UInt8]
        if target.framing == .close {
            var whole: [UInt8]?
            while whole == nil { whole = try reader.readToClose(fd) }
            answer = whole ?? []
        } else {
            answer = try reader.readLineBlocking(fd)
        }
        let t1 = Clock.nanos()
        guard !Answer.isError(answer) else { throw BenchError("\(target.socket) answered with an error") }
        return t1 - t0
    }

    private func sleep(seconds: Double) {
        var want = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var left = timespec()
        while nanosleep(&want, &left) != 0 && errno == EINTR { want = left }
    }
}
