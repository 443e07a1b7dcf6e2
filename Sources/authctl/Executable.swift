#if canImport(Glibc)
import Glibc
#endif

/// authctl's own path, for the commands that write it into another program's
/// configuration (git's credential helper, kubectl's exec plugin), and running such a
/// program.
enum Executable {
    /// This executable's path (`/proc/self/exe`), else plain `authctl`: the configuration
    /// then works whatever PATH git or kubectl run with.
    static func ownPath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return "authctl" }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Runs `argv` (found on PATH) with authctl's stdin, stdout and stderr; its exit status
    /// (128 + N for a signal N), 127 when it cannot be started.
    static func run(_ argv: [String]) -> Int32 {
        var pid = pid_t()
        let args: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { args.forEach { free($0) } }
        guard posix_spawnp(&pid, argv[0], nil, nil, args, environ) == 0 else { return 127 }
        return wait(for: pid) ?? 1
    }

    /// Waits for the child `pid` and gives its exit status as a shell reports it (128 + N
    /// for a signal N); nil when it cannot be waited for.
    static func wait(for pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return nil }
        }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import as macros.
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}
