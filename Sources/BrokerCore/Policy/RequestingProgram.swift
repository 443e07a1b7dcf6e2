/// The program at the other end of a connection, as the user is shown it (a notification):
/// its executable's name, its pid, and whether it is OpenSSH carrying a forwarded socket
/// (then the program that asks runs on another host, and only ssh is known here).
public struct RequestingProgram: Sendable, Equatable, CustomStringConvertible {
    /// The executable's file name (`authctl`, `ssh`), or nil when it could not be read.
    public var name: String?
    public var pid: Int32
    /// Whether the peer is one of OpenSSH's programs (``Forwarders``).
    public var forwarded: Bool
    /// What its questions on the desktop count against (``ProgramShare``): its process
    /// when nothing better is known.
    public var share: ProgramShare

    public init(executable: String?, pid: Int32, forwarded: Bool, share: ProgramShare? = nil) {
        self.name = executable.flatMap { $0.split(separator: "/").last.map(String.init) }
        self.pid = pid
        self.forwarded = forwarded
        self.share = share ?? .process(pid)
    }

    /// "authctl (pid 42)", or "ssh (pid 7), over a forwarded ssh socket".
    public var description: String {
        "\(name ?? "a program") (pid \(pid))" + (forwarded ? ", over a forwarded ssh socket" : "")
    }
}

/// The program one request counts against where programs get fair shares of something
/// limited (the questions waiting on the desktop, `DesktopNotifier`; an account's
/// `max_tokens_per_account`, `TokenCache.makeRoom`), so that one program's flood never
/// refuses another program: the executable's file (device and inode), as the `[[allow]]`
/// rules match it, when the connection was identified (under rules), else the process
/// that connected. A forwarded caller (the peer runs OpenSSH) is its process: the forward,
/// not ssh, is the program.
public enum ProgramShare: Sendable, Hashable, CustomStringConvertible {
    case executable(device: UInt64, inode: UInt64)
    case process(Int32)

    /// The share of a connection from process `pid` running `executable` (nil: not read,
    /// no rules in force); `forwarded` when that file is one of OpenSSH's.
    public init(pid: Int32, executable: FileID?, forwarded: Bool) {
        if let executable, !forwarded {
            self = .executable(device: executable.device, inode: executable.inode)
        } else {
            self = .process(pid)
        }
    }

    public var description: String {
        switch self {
        case .executable(let device, let inode): "file \(device):\(inode)"
        case .process(let pid): "pid \(pid)"
        }
    }
}

/// Who made the request being worked on, for what the daemon shows the user (the sign-in
/// on demand's and `confirm`'s notifications). Set by the server around each request's
/// work; read only when something is shown, since looking costs a read of /proc.
public enum Requester {
    /// How to look up the requesting program.
    public struct Lookup: Sendable {
        /// Reads the requesting program (from /proc); nil when it cannot be known.
        public let find: @Sendable () -> RequestingProgram?
        /// What the request counts against (``ProgramShare``): known without a look at
        /// /proc (the connection's pid, or the file its identity was read as).
        public let share: ProgramShare?

        public init(share: ProgramShare? = nil, _ find: @escaping @Sendable () -> RequestingProgram?) {
            self.find = find
            self.share = share
        }
    }

    /// Looks up the requesting program; nil outside a request.
    // A struct, not the optional closure itself: binding a @TaskLocal of optional function
    // type crashes in swift_task_localValuePush in optimised builds (Swift 6.3; debug
    // builds are fine), which took down the release daemon at its first sign-in.
    @TaskLocal public static var lookup: Lookup?

    /// The program that made the current request, when known.
    public static var program: RequestingProgram? {
        guard let lookup, var program = lookup.find() else { return nil }
        if let share = lookup.share { program.share = share }
        return program
    }

    /// What the current request counts against; nil outside a request (a background
    /// refresh) or when the server did not say.
    public static var share: ProgramShare? { lookup?.share }
}
