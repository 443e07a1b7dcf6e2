#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// Opens URLs in the user's browser: the commands in `$BROWSER` when it is set, otherwise
/// `xdg-open` in a desktop session. Shared by `authctl login` and the daemon's "Sign in"
/// notification action.
public enum Browser {
    /// How the attempt went.
    public enum Outcome: Equatable, Sendable {
        /// A command took the URL (it exited 0, or is still showing the page).
        case opened(command: String)
        /// Every command failed; the sentence says how.
        case failed(String)
        /// No `$BROWSER` and no desktop session: nothing was tried.
        case unavailable
    }

    /// How long an opener may take to say it failed; one that is still running then is
    /// taken to be the browser itself, showing the page.
    public static let patience = 3.0

    /// Tries each command of `$BROWSER` in turn (or `xdg-open` when DISPLAY or
    /// WAYLAND_DISPLAY is set) until one takes the URL. `launcher` goes before each command
    /// (the daemon's `systemd-run`, so the browser does not run inside its sandbox).
    public static func open(_ url: String, launcher: [String] = [],
                            environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) -> Outcome {
        let commands: [[String]]
        if let list = environment("BROWSER"), !list.allSatisfy({ $0 == ":" || $0 == " " }) {
            commands = Self.commands(browser: list, url: url)
        } else if environment("DISPLAY") != nil || environment("WAYLAND_DISPLAY") != nil {
            commands = [["xdg-open", url]]
        } else {
            return .unavailable
        }
        var failures: [String] = []
        for command in commands {
            let argv = launcher + command
            switch run(argv) {
            case nil: return .opened(command: command[0])
            case let why?: failures.append("\(command[0]) \(why)")
            }
        }
        let source = environment("BROWSER") != nil ? "the BROWSER commands" : "xdg-open"
        return .failed("could not open a browser with \(source) (\(failures.joined(separator: "; "))): open the page above yourself")
    }

    /// `$BROWSER` as argument vectors: a colon-separated list of commands; `%s` in a command
    /// stands for the URL (`%%` for a percent sign), and a command without `%s` gets the URL
    /// as its last argument — the convention the variable has had since the 1990s.
    public static func commands(browser: String, url: String) -> [[String]] {
        browser.split(separator: ":").compactMap { entry in
            var words = entry.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard !words.isEmpty else { return nil }
            if words.contains(where: { $0.contains("%s") }) {
                words = words.map { substitute($0, url) }
            } else {
                words = words.map { $0.replacing("%%", with: "%") } + [url]
            }
            return words
        }
    }

    private static func substitute(_ word: String, _ url: String) -> String {
        var out = ""
        var chars = word[...]
        while let c = chars.popFirst() {
            if c == "%", let next = chars.first, next == "s" || next == "%" {
                chars.removeFirst()
                out += next == "s" ? url : "%"
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// Runs the command with its output discarded; nil when it took the URL, otherwise why
    /// not ("was not found", "exited with status 3").
    private static func run(_ argv: [String]) -> String? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var pid: pid_t = 0
        let args: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { args.forEach { free($0) } }
        let spawned = posix_spawnp(&pid, argv[0], &actions, nil, args, environ)
        guard spawned == 0 else {
            return spawned == ENOENT ? "was not found" : "could not be started (\(String(cString: strerror(spawned))))"
        }
        var status: Int32 = 0
        var waited = 0.0
        while waited < patience {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid {
                // WIFEXITED / WEXITSTATUS, which Glibc does not export to Swift.
                let signal = status & 0x7f
                if signal != 0 { return "was killed by signal \(signal)" }
                let code = (status >> 8) & 0xff
                return code == 0 ? nil : "exited with status \(code)"
            }
            if r < 0 && errno != EINTR { return nil }
            usleep(50_000)
            waited += 0.05
        }
        // Still running: a browser in the foreground, showing the page. Reaped when it
        // exits, so a long-lived process (the daemon) keeps no zombie.
        let child = pid
        DispatchQueue.global(qos: .utility).async {
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        }
        return nil
    }
}
