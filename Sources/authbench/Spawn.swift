#if canImport(Glibc)
import Glibc
#endif

/// Starting processes: the whole-process cost of `authctl token` (and of the C client
/// beside it), and the daemon's time from exec to its first answer.
enum Spawn {
    /// Starts `command` with stdin from /dev/null and stdout/stderr to `output`
    /// (/dev/null when nil); returns the pid.
    static func start(_ command: [String], output: String?) throws(BenchError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let output {
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchError("cannot start \(command[0]): \(String(cString: strerror(rc)))") }
        return pid
    }

    static func wait(_ pid: pid_t) -> Int32 {
        waitCounting(pid).status
    }

    /// Waits for `pid`; its exit status and the major page faults it took (pages read from
    /// disk: a whole process after a quiet spell may find its image's pages evicted,
    /// docs/performance.md).
    static func waitCounting(_ pid: pid_t) -> (status: Int32, majorFaults: Int) {
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS are macros Swift does not import.
        return (status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), usage.ru_majflt)
    }

    /// Runs `command` `runs` times (after a few unmeasured ones) and reports the wall time
    /// of each whole process, exec to exit.
    static func timing(_ command: [String], runs: Int, expect: Int32 = 0) throws(BenchError) -> String {
        for _ in 0..<5 {
            let status = wait(try start(command, output: nil))
            guard status == expect else { throw BenchError("\(command[0]) exited with status \(status)") }
        }
        var times: [UInt64] = []
        for _ in 0..<runs {
            let t0 = Clock.nanos()
            let status = wait(try start(command, output: nil))
            times.append(Clock.nanos() - t0)
            guard status == expect else { throw BenchError("\(command[0]) exited with status \(status)") }
        }
        let s = LatencySummary(nanos: times)
        var out = JSONLine()
        out.add("runs", runs)
        out.add("p50_ms", s.p50 / 1000)
        out.add("p90_ms", s.p90 / 1000)
        out.add("mean_ms", s.mean / 1000)
        return out.text
    }

    /// Starts the daemon and polls its socket until `daemon.status` is answered. The daemon
    /// is left running; its pid is in the output.
    static func ready(_ command: [String], socket: String, log: String, timeout: Double) throws(BenchError) -> String {
        let request = Array(#"{"jsonrpc":"2.0","id":1,"method":"daemon.status"}"#.utf8) + [UInt8(ascii: "\n")]
        let t0 = Clock.nanos()
        let pid = try start(command, output: log)
        let deadline = t0 + UInt64(timeout * 1e9)
        while Clock.nanos() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw BenchError("\(command[0]) exited before it answered; see \(log)")
            }
            guard let fd = try? UnixClient.connect(socket) else {
                usleep(100)
                continue
            }
            defer { close(fd) }
            try UnixClient.send(fd, request)
            var reader = LineReader()
            let answer = try reader.readLineBlocking(fd)
            let t1 = Clock.nanos()
            guard !Answer.isError(answer) else { throw BenchError("daemon.status failed; see \(log)") }
            var out = JSONLine()
            out.add("ready_ms", Double(t1 - t0) / 1e6)
            out.add("pid", Int(pid))
            return out.text
        }
        kill(pid, SIGTERM)
        throw BenchError("\(command[0]) did not answer within \(timeout) s; see \(log)")
    }
}
