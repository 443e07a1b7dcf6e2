#if canImport(Glibc)
import Glibc
#endif
import CLinux

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
///
/// The client's own wake-up is not what is measured: on CPUs busy with other programs a
/// woken client waits out their time slices (1.4 ms each by default on two CPUs) after its
/// answer has arrived, whichever target it happens to be asking (traced: 1.7 ms behind a
/// linker with the answer sent after 0.17 ms; docs/performance.md, "The first request after
/// 60 s"). So this thread asks for the shortest slice the kernel gives (Linux 6.12 or
/// later), as the daemon's front door does; the servers keep whatever they ask for. What
/// it still waited for a CPU in each request (its run-queue delay, from
/// `/proc/thread-self/schedstat`; it includes waiting while the server ran on the same
/// CPU) is reported beside each time. Whole processes (`command`) keep the default slice.
struct Quiet {
    struct Target {
        let socket: String
        /// The request; with `.line` framing `\n`-terminated.
        let line: [UInt8]
        let framing: Load.Framing
        /// Instead of a request on the socket: a whole process, exec to exit.
        let command: [String]
        /// The server's threads' /proc/PID/task/TID/schedstat files: its time on a CPU and
        /// waiting for one during each request is read from them, outside the timed part.
        var schedstat: [String] = []
    }

    let targets: [Target]
    let quiet: Double
    let rounds: Int
    var gap: Double = 0.3

    /// The time slice this client asks for: the kernel's shortest.
    static let slice: UInt64 = 100_000

    func run() throws(BenchError) -> String {
        // Refused or unknown: the default slice, as before. Not for whole processes: they
        // would inherit it, and they are measured as users start them.
        if targets.allSatisfy({ $0.command.isEmpty }) { _ = clinux_request_slice(Self.slice) }
        var samples = [[UInt64]](repeating: [], count: targets.count)
        var waits = [[UInt64]](repeating: [], count: targets.count)
        var served = [[(ran: UInt64, waited: UInt64)]](repeating: [], count: targets.count)
        var majors = [[Double]](repeating: [], count: targets.count)
        for round in 0..<rounds {
            sleep(seconds: quiet)
            for k in 0..<targets.count {
                let i = (k + round) % targets.count
                if k > 0 { sleep(seconds: gap) }
                let server = Self.schedstat(targets[i].schedstat)
                let before = Self.runQueueWait()
                var faults = 0
                samples[i].append(try once(targets[i], majorFaults: &faults))
                majors[i].append(Double(faults))
                waits[i].append(Self.runQueueWait() &- before)
                let after = Self.schedstat(targets[i].schedstat)
                served[i].append((after.ran &- server.ran, after.waited &- server.waited))
            }
        }
        var out = "{\"quiet_s\":\(quiet),\"rounds\":\(rounds),\"targets\":["
        for (i, times) in samples.enumerated() {
            let s = LatencySummary(nanos: times)
            var line = JSONLine()
            line.add("p50_us", s.p50)
            line.add("max_us", Double(times.max() ?? 0) / 1000)
            line.add("min_us", Double(times.min() ?? 0) / 1000)
            // Each round's time and this client's own wait for a CPU in it, in round order.
            line.add("rounds_us", times.map { Double($0) / 1000 })
            line.add("client_wait_us", waits[i].map { Double($0) / 1000 })
            // A whole process's pages read from disk in each round.
            if !targets[i].command.isEmpty { line.add("major_faults", majors[i]) }
            if !targets[i].schedstat.isEmpty {
                line.add("server_run_us", served[i].map { Double($0.ran) / 1000 })
                line.add("server_wait_us", served[i].map { Double($0.waited) / 1000 })
            }
            out += (i > 0 ? "," : "") + line.text
        }
        return out + "]}"
    }

    /// One request on a new connection (or one process), timed from connect to the whole
    /// answer; a process's major faults are left in `majorFaults`.
    private func once(_ target: Target, majorFaults: inout Int) throws(BenchError) -> UInt64 {
        if !target.command.isEmpty {
            let t0 = Clock.nanos()
            let (status, faults) = Spawn.waitCounting(try Spawn.start(target.command, output: nil))
            let t1 = Clock.nanos()
            guard status == 0 else { throw BenchError("\(target.command[0]) exited with status \(status)") }
            majorFaults = faults
            return t1 - t0
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

    /// Nanoseconds this thread has spent ready to run but waiting for a CPU (the second
    /// field of /proc/thread-self/schedstat); 0 where the kernel does not keep it.
    static func runQueueWait() -> UInt64 {
        schedstat(["/proc/thread-self/schedstat"]).waited
    }

    /// Nanoseconds on a CPU and waiting for one, summed over schedstat files (the first two
    /// fields of each); a file that cannot be read (a thread gone) counts nothing.
    static func schedstat(_ paths: [String]) -> (ran: UInt64, waited: UInt64) {
        var total: (ran: UInt64, waited: UInt64) = (0, 0)
        var buffer = [UInt8](repeating: 0, count: 96)
        for path in paths {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard n > 0 else { continue }
            let fields = buffer[..<n].split(separator: UInt8(ascii: " ")).prefix(2).map { field in
                field.reduce(UInt64(0)) { value, digit in
                    digit >= 48 && digit <= 57 ? value &* 10 &+ UInt64(digit - 48) : value
                }
            }
            guard fields.count == 2 else { continue }
            total = (total.ran &+ fields[0], total.waited &+ fields[1])
        }
        return total
    }

    private func sleep(seconds: Double) {
        var want = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
        var left = timespec()
        while nanosleep(&want, &left) != 0 && errno == EINTR { want = left }
    }
}
