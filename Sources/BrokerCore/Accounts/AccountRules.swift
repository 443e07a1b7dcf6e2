import BrokerProtocol

/// One `[[providers.NAME.accounts]]` rule: the account a request that names none gets when
/// the caller's context matches (docs/configuration.md, "Which account").
public struct AccountRule: Sendable, Equatable {
    public enum Condition: Sendable, Equatable {
        /// The caller's working directory (`/proc/PID/cwd`) matches the pattern (`~` is the
        /// daemon's home).
        case directory(PathPattern)
        /// The git remote the caller sends (`context.git_remote`) matches the pattern.
        case gitRemote(PathPattern)
        /// The caller's `AUTHBROKER_ACCOUNT` (`account_hint`), whatever it names.
        case environment
    }

    /// The account it chooses (a username, display name or subject); for `environment`, nil.
    public var account: String?
    public var condition: Condition
    /// What `chosen_by` says when it chose: "directory ~/work/**", made once at load.
    public let label: String

    public init(account: String?, condition: Condition) {
        self.account = account
        self.condition = condition
        switch condition {
        case .directory(let p): label = "directory \(p.text)"
        case .gitRemote(let p): label = "git_remote \(p.text)"
        case .environment: label = "environment AUTHBROKER_ACCOUNT"
        }
    }

    /// Whether the rule needs the caller's working directory to decide.
    var needsDirectory: Bool {
        if case .directory = condition { return true }
        return false
    }
}

/// A glob over a path or URL, matched byte by byte: `*` any run of bytes but `/`, `**` any
/// run including `/` (`dir/**` also matches `dir` itself), `?` one byte but `/`; everything
/// else stands for itself. A leading `~` is the home folder. Builds nothing to match.
public struct PathPattern: Sendable, Equatable {
    /// As written in config.toml.
    public let text: String
    private let bytes: [UInt8]
    /// The pattern starts with `~/` (or is `~`): matched against home + the rest.
    private let fromHome: Bool

    public init(_ text: String) {
        self.text = text
        if text == "~" || text.hasPrefix("~/") {
            fromHome = true
            bytes = Array(text.utf8.dropFirst())
        } else {
            fromHome = false
            bytes = Array(text.utf8)
        }
    }

    /// Whether `subject` matches; `home` stands for a leading `~` (nil: such a pattern never
    /// matches). A trailing `/` of a directory is ignored.
    public func matches(_ subject: String, home: String? = nil) -> Bool {
        var subject = subject
        return subject.withUTF8 { s in
            var s = s[...]
            while s.count > 1, s.last == UInt8(ascii: "/") { s = s.dropLast() }
            guard fromHome else { return Self.match(bytes[...], s) }
            guard var h = home else { return false }
            return h.withUTF8 { h in
                var h = h[...]
                while h.count > 1, h.last == UInt8(ascii: "/") { h = h.dropLast() }
                guard s.starts(with: h) else { return false }
                return Self.match(bytes[...], s.dropFirst(h.count))
            }
        }
    }

    private static let slash = UInt8(ascii: "/")
    private static let star = UInt8(ascii: "*")

    /// Glob matching with backtracking, on slices (no copies).
    private static func match(_ p: ArraySlice<UInt8>, _ s: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        var p = p
        var s = s
        while let c = p.first {
            if c == star {
                let double = p.count >= 2 && p[p.startIndex + 1] == star
                if double {
                    var rest = p.dropFirst(2)
                    // "dir/**" matches "dir" too: "/**" at the end may match nothing.
                    if rest.isEmpty { return true }
                    if rest.first == slash {
                        // "**/" matches zero or more whole folders.
                        rest = rest.dropFirst()
                        if match(rest, s) { return true }
                        var i = s.startIndex
                        while i < s.endIndex {
                            if s[i] == slash, match(rest, s[(i + 1)...]) { return true }
                            i += 1
                        }
                        return false
                    }
                    var i = s.startIndex
                    while i <= s.endIndex {
                        if match(rest, s[i...]) { return true }
                        i += 1
                    }
                    return false
                }
                let rest = p.dropFirst()
                var i = s.startIndex
                while true {
                    if match(rest, s[i...]) { return true }
                    guard i < s.endIndex, s[i] != slash else { return false }
                    i += 1
                }
            }
            // "dir/**": the "/" before a final "**" may match the end of the subject.
            if c == slash, s.isEmpty, p.count == 3, p[p.startIndex + 1] == star, p[p.startIndex + 2] == star { return true }
            guard let b = s.first else { return false }
            if c == UInt8(ascii: "?") {
                guard b != slash else { return false }
            } else if c != b {
                return false
            }
            p = p.dropFirst()
            s = s.dropFirst()
        }
        return s.isEmpty
    }
}

/// What a request says, or the daemon knows, about the caller's context, for the account
/// rules. Nothing in it is a secret or proves anything: the caller chooses its directory
/// and what it sends (docs/configuration.md, "Which account").
struct AccountContext: Sendable {
    /// The caller's working directory: not read yet (the cache-hit path does not read
    /// /proc), or read (nil: could not be, or a forwarded caller, whose peer is ssh).
    enum Directory: Sendable {
        case unread
        case read(String?)
    }

    var directory: Directory = .unread
    var gitRemote: String? = nil
    var hint: String? = nil
    /// What `~` in a directory pattern is.
    var home: String? = nil
}

/// Why the account of a request is the one it got: `chosen_by` in the answer.
enum AccountChoice: Sendable, Equatable {
    /// The request named it (`account`).
    case named
    /// A rule's condition matched.
    case rule(AccountRule)
    /// The provider's `default_account`, several being signed in.
    case defaultAccount
    /// The only account of the provider.
    case only

    var label: String {
        switch self {
        case .named: "account param"
        case .rule(let r): r.label
        case .defaultAccount: "default_account"
        case .only: "only account"
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// The working directory of the program that made the current request (`Requester`),
/// from `/proc/PID/cwd`; nil outside a request, for a forwarded caller (the peer is ssh,
/// not the program that asks) or when it cannot be read. Read on the slow path only.
enum CallerDirectory {
    static func current() -> String? {
        guard let program = Requester.program, !program.forwarded else { return nil }
        return read(pid: program.pid)
    }

    static func read(pid: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/\(pid)/cwd", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let bytes = buffer[..<n].map { UInt8(bitPattern: $0) }
        let path = String(decoding: bytes, as: UTF8.self)
        // A directory removed since: the kernel appends " (deleted)"; it matches nothing.
        return path.hasSuffix(" (deleted)") ? nil : path
    }

    /// The daemon's home folder, for `~` in directory patterns.
    static let home: String? = getenv("HOME").map { String(cString: $0) }
}

extension TokenGetResult {
    /// The answer, saying what chose its account (`chosen_by`).
    func chosen(by choice: AccountChoice) -> TokenGetResult {
        var answer = self
        answer.chosenBy = choice.label
        return answer
    }
}
