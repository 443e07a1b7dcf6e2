/// The program at the other end of a connection, as the user is shown it (a notification):
/// its executable's name, its pid, and whether it is OpenSSH carrying a forwarded socket
/// (then the program that asks runs on another host, and only ssh is known here).
public struct RequestingProgram: Sendable, Equatable, CustomStringConvertible {
    /// The executable's file name (`authctl`, `ssh`), or nil when it could not be read.
    public var name: String?
    public var pid: Int32
    /// Whether the peer is one of OpenSSH's programs (``Forwarders``).
    public var forwarded: Bool

    public init(executable: String?, pid: Int32, forwarded: Bool) {
        self.name = executable.flatMap { $0.split(separator: "/").last.map(String.init) }
        self.pid = pid
        self.forwarded = forwarded
    }

    /// "authctl (pid 42)", or "ssh (pid 7), over a forwarded ssh socket".
    public var description: String {
        "\(name ?? "a program") (pid \(pid))" + (forwarded ? ", over a forwarded ssh socket" : "")
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

        public init(_ find: @escaping @Sendable () -> RequestingProgram?) {
            self.find = find
        }
    }

    /// Looks up the requesting program; nil outside a request.
    // A struct, not the optional closure itself: binding a @TaskLocal of optional function
    // type crashes in swift_task_localValuePush in optimised builds (Swift 6.3; debug
    // builds are fine), which took down the release daemon at its first sign-in.
    @TaskLocal public static var lookup: Lookup?

    /// The program that made the current request, when known.
    public static var program: RequestingProgram? { lookup?.find() }
}
