#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging

/// Warns, at start and on each reload, about `[[allow]]` rules whose `exe` can never match:
/// a rule matches the file its path leads to *on the host* (device and inode). A path that
/// leads to no file here is usually the path of a program inside a container, whose
/// processes run their image's file (another file to the kernel); a file in a container
/// engine's storage is run by the container through its overlay, which is another file
/// too (docs/integrations.md, "Containers and the caller policy").
enum RuleFileCheck {
    static func warnAboutUnmatchableRules(_ policy: CallerPolicy, home: String?, logger: Logger) {
        for rule in policy.rules where !rule.forwarded {
            if let why = problem(with: rule.executable, home: home) {
                logger.warning("an [[allow]] rule can never match: \(why) (docs/integrations.md, \"Containers and the caller policy\")",
                               metadata: ["exe": "\(rule.executable)"])
            }
        }
    }

    /// Why a rule for `path` cannot match any caller, or nil when it can.
    static func problem(with path: String, home: String?) -> String? {
        if containerStorage(home: home).contains(where: { path.hasPrefix($0) }) {
            return "the file is in a container engine's storage, and a container runs it through its overlay file system, which is another file to the kernel: mount the host's program into the container instead and name the host's path"
        }
        var st = stat()
        guard stat(path, &st) == 0 else {
            return "no such file on this host; rules match the host's file, never a path inside a container: mount the host's program into the container and name its host path, with namespaces = \"any\""
        }
        return nil
    }

    private static func containerStorage(home: String?) -> [String] {
        ["/var/lib/containers/", "/var/lib/docker/", "/run/containers/"]
            + (home.map { ["\($0)/.local/share/containers/", "\($0)/.local/share/docker/"] } ?? [])
    }
}
