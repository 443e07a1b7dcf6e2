#if canImport(Glibc)
import Glibc
#endif
import BrokerServer
import CLinux

/// The daemon's own confinement (docs/security.md, "Confinement"): Landlock, applied by the
/// daemon to itself at start, before it has a second thread (Landlock binds the calling
/// thread and the threads and children it makes later). From then on the daemon may read
/// the system (`/usr`, `/etc`, `/proc`, `/sys`, certificates) and its configuration's
/// folder, read and write only its runtime folder (the socket's), run programs only from
/// the system (`systemd-run`, `xdg-open`), and nothing of the user's home besides. Callers
/// are identified by the helper forked just before (`ProcessInspector`), which stays
/// outside the Landlock domain.
struct Sandbox {
    /// What the daemon may read, besides the system.
    var readable: [String]
    /// What it may read and write (its socket's folder).
    var writable: [String]
    /// Why abstract Unix sockets stay reachable from the sandbox when the kernel could
    /// scope them (ABI 6): the session bus or systemd's notification socket is one, and the
    /// daemon needs both. nil: they are scoped.
    var abstractSocketsNeeded: String?

    /// Whether the daemon confines itself, and how firmly.
    enum Choice: Equatable {
        case off
        /// On by default: a kernel without Landlock is a warning.
        case byDefault
        /// Asked for: a kernel without Landlock stops the daemon.
        case required
    }

    /// Whether to confine: `AUTHBROKER_SANDBOX=on|off`; by default on under systemd
    /// (`INVOCATION_ID`), where a browser is started by the user manager, outside the
    /// sandbox. Started from a shell, the daemon would start the browser itself, inside it.
    static func choice(environment: (String) -> String?) -> Result<Choice, Failure> {
        switch environment("AUTHBROKER_SANDBOX") {
        case nil, "": return .success(environment("INVOCATION_ID") != nil ? .byDefault : .off)
        case "on", "1", "yes": return .success(.required)
        case "off", "0", "no": return .success(.off)
        case let other?: return .failure(Failure(description: "AUTHBROKER_SANDBOX=\(other) is neither on nor off"))
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The folders of a daemon that reads `configPath` and listens in `socketFolder`.
    /// The configuration's folder is readable (an editor saves by renaming a new file over
    /// the old one, which a rule on the file itself would not follow), unless that folder
    /// holds the home folder (`~/config.toml`): then only the file.
    ///
    /// Also readable: the CA certificates `SSL_CERT_FILE` and `SSL_CERT_DIR` name (which may
    /// be anywhere), and the folder name resolution's files really are in when
    /// `/etc/resolv.conf` or `/etc/hosts` link out of `/etc` (`/run/NetworkManager`,
    /// `/run/resolvconf`…): the folder, because those files are replaced by renaming.
    init(configPath: String, socketFolder: String?, environment: (String) -> String?) {
        let folder = Self.parent(of: configPath)
        // A folder that holds the home folder would open all of it (~/.ssh included).
        let home = environment("HOME")
        func holdsHome(_ folder: String) -> Bool {
            home.map { home in folder == "/" || home == folder || home.hasPrefix(folder + "/") } ?? false
        }
        readable = [holdsHome(folder) ? configPath : folder]
        for name in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
            guard let value = environment(name), !value.isEmpty else { continue }
            readable += value.split(separator: ":").map(String.init).filter { !holdsHome($0) }
        }
        for file in ["/etc/resolv.conf", "/etc/hosts"] {
            guard let target = Self.resolved(file), !target.hasPrefix("/etc/"), !target.hasPrefix("/usr/") else { continue }
            readable.append(Self.parent(of: target))
        }
        writable = socketFolder.map { [$0] } ?? []
        abstractSocketsNeeded = Self.abstractSocketsNeeded(environment: environment)
    }

    /// Why the daemon must reach abstract Unix sockets, or nil when it needs none: the
    /// session bus (the Secret Service, notifications) at an abstract address, or none named
    /// and no `$XDG_RUNTIME_DIR/bus` (GDBus would then autolaunch one, over X11's abstract
    /// socket); systemd's `NOTIFY_SOCKET` at an abstract address (`@…`).
    static func abstractSocketsNeeded(environment: (String) -> String?) -> String? {
        if let bus = environment("DBUS_SESSION_BUS_ADDRESS"), !bus.isEmpty {
            if bus.contains("abstract=") { return "the session bus is at an abstract address (\(bus.split(separator: ",").first ?? ""))" }
        } else {
            let runtime = environment("XDG_RUNTIME_DIR") ?? ""
            if runtime.isEmpty || access(runtime + "/bus", F_OK) != 0 {
                return "no session bus address is set and there is no $XDG_RUNTIME_DIR/bus, so D-Bus may start one at an abstract address"
            }
        }
        if let notify = environment("NOTIFY_SOCKET"), notify.hasPrefix("@") {
            return "systemd's NOTIFY_SOCKET is an abstract socket"
        }
        return nil
    }

    /// Where `path` leads, links followed; nil when it leads nowhere.
    private static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// What `apply` did.
    enum Outcome: Equatable {
        /// Confined, under this Landlock ABI version.
        case confined(abi: Int)
        /// Landlock is not to be had (the sentence says why): the daemon runs unconfined.
        case unsupported(String)
    }

    /// Confines the process. Throws when the kernel has Landlock but the rules cannot be
    /// put in force: never a silent start without the confinement asked for.
    func apply() throws(Failure) -> Outcome {
        let code = clinux_landlock_abi()
        let abi = Int(code)
        switch -code {
        case EPERM: return .unsupported("a system-call filter refuses the Landlock calls (allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self)")
        case EOPNOTSUPP: return .unsupported("Landlock is disabled in this kernel (add landlock to the lsm= boot parameter)")
        case _ where abi < 1: return .unsupported("this kernel has no Landlock (Linux 5.13 or later has it)")
        default: break
        }
        let threads = clinux_thread_count()
        guard threads == 1 else {
            // The other threads would stay unconfined.
            throw Failure(description: "cannot confine the daemon: it already runs \(threads) threads (\(Self.threadNames()))")
        }
        var handled = Access.abi1
        if abi >= 2 { handled |= Access.refer }
        if abi >= 3 { handled |= Access.truncate }
        if abi >= 5 { handled |= Access.ioctlDevice }
        // ABI 6: no signals to processes outside the sandbox (the user's other programs),
        // and no connection to an abstract Unix socket made outside it (an X11 display's,
        // another program's private socket), unless the daemon's bus needs one.
        var scoped: UInt64 = abi >= 6 ? Access.scopeSignal : 0
        if abi >= 6, abstractSocketsNeeded == nil { scoped |= Access.scopeAbstractUnixSocket }
        let ruleset = clinux_landlock_ruleset(handled, scoped)
        guard ruleset >= 0 else { throw Failure(description: "cannot create a Landlock ruleset: \(Self.error())") }
        defer { close(ruleset) }
        func allow(_ path: String, _ access: UInt64, required: Bool) throws(Failure) {
            // A rule on a file may only grant what applies to files (not READ_DIR, MAKE_*…).
            var st = stat()
            let isFolder = stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
            let rights = access & handled & (isFolder ? ~0 : Access.onFiles)
            guard clinux_landlock_allow(ruleset, path, rights) == 0 else {
                if !required, errno == ENOENT || errno == ENOTDIR { return }
                throw Failure(description: "cannot allow \(path) in the Landlock ruleset: \(Self.error())")
            }
        }
        // Programs and libraries; /bin, /lib… are links into /usr on merged systems.
        for path in ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
            try allow(path, Access.read | Access.execute, required: path == "/usr")
        }
        // Settings, certificates, name resolution (/etc/resolv.conf may point into /run),
        // the process's own /proc and the CPU count in /sys.
        for path in ["/etc", "/proc", "/sys", "/run/systemd/resolve"] {
            try allow(path, Access.read, required: false)
        }
        try allow("/dev/null", Access.readFile | Access.writeFile | Access.truncate, required: false)
        for path in ["/dev/urandom", "/dev/random"] { try allow(path, Access.readFile, required: false) }
        for path in readable { try allow(path, Access.read, required: false) }
        for path in writable { try allow(path, Access.read | Access.writeInFolder, required: true) }
        guard clinux_landlock_enforce(ruleset) == 0 else {
            throw Failure(description: "cannot enforce the Landlock ruleset: \(Self.error())")
        }
        return .confined(abi: abi)
    }

    /// `LANDLOCK_ACCESS_FS_*` and `LANDLOCK_SCOPE_*` (linux/landlock.h).
    enum Access {
        static let execute: UInt64 = 1 << 0
        static let writeFile: UInt64 = 1 << 1
        static let readFile: UInt64 = 1 << 2
        static let readDir: UInt64 = 1 << 3
        static let removeFile: UInt64 = 1 << 5
        static let makeReg: UInt64 = 1 << 8
        static let makeSock: UInt64 = 1 << 9
        /// Everything of ABI 1: execute … make_sym.
        static let abi1: UInt64 = (1 << 13) - 1
        static let refer: UInt64 = 1 << 13
        static let truncate: UInt64 = 1 << 14
        static let ioctlDevice: UInt64 = 1 << 15
        static let scopeAbstractUnixSocket: UInt64 = 1 << 0
        static let scopeSignal: UInt64 = 1 << 1

        static let read = readFile | readDir
        /// What a rule on a single file may grant.
        static let onFiles = execute | writeFile | readFile | truncate | ioctlDevice
        /// The socket folder: the socket and its stale predecessor, nothing executable.
        static let writeInFolder = writeFile | removeFile | makeReg | makeSock | truncate
    }

    private static func threadNames() -> String {
        guard let dir = opendir("/proc/self/task") else { return "" }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let tid = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard !tid.hasPrefix("."), let f = fopen("/proc/self/task/\(tid)/comm", "r") else { continue }
            var line = [CChar](repeating: 0, count: 64)
            _ = fgets(&line, 64, f)
            fclose(f)
            names.append(String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return names.joined(separator: ", ")
    }

    private static func error() -> String { String(cString: strerror(errno)) }
}
