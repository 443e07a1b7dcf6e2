#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import BrokerClient
import BrokerProtocol

/// `authctl git-credential`: a git credential helper that answers with a token.
struct GitCredential: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "git-credential",
        abstract: "A git credential helper: the password is an access token.",
        discussion: """
            git runs it with get, store or erase and key=value lines on stdin. For get, \
            authctl answers username=, password=<token> and password_expiry_utc=<Unix \
            seconds>; erase (the server refused the token) makes authbrokerd drop the token, \
            so the next get has a fresh one; store does nothing (tokens live in authbrokerd). \
            Configure it for the one host it serves:

              git config --global credential.https://git.example.com.helper \\
                  '!authctl git-credential --resource https://git.example.com'

            The resource defaults to protocol://host of the request. With --resource, a \
            request for any other host is left unanswered, so the token never goes to a \
            server it is not for. Only https (and http to a loopback host) is answered.
            """
    )

    @Argument(help: ArgumentHelp("What git asks: get, store or erase.", valueName: "operation"))
    var operation: String

    @OptionGroup var token: TokenOptions

    @Option(help: "The username git sends with the token; servers differ (GitLab: oauth2, GitHub: x-access-token).")
    var username = "oauth2"

    func validate() throws {
        guard ["get", "store", "erase"].contains(operation) else {
            throw ValidationError("the operation must be get, store or erase, as git passes it")
        }
    }

    func run() throws {
        let request = GitCredentialRequest(lines: StandardInput.linesUntilBlank())
        // git expects the helper to read all of its input, even for operations it ignores.
        guard operation != "store", let resource = request.resource(configured: token.resource) else { return }
        guard operation == "get" else { return Self.reject(request) }
        var params = token.params(resource: resource)
        // For the provider's git_remote account rules (the path only with credential.useHttpPath).
        params.context = request.remote.map { TokenContext(gitRemote: $0) }
        let result = try DaemonCall.printableToken(params, waitForSignIn: token.waitForSignIn)
        Output.line([
            "username=\(username)",
            "password=\(result.accessToken)",
            "password_expiry_utc=\(result.expiresAt)",
        ].joined(separator: "\n"))
    }
}

extension GitCredential {
    /// `erase`: git sends it when the server refused the credential (HTTP 401), with the
    /// password it sent. When that is a token the daemon still caches (revoked before it
    /// expired), the daemon drops it (`token.reject`), so git's next `get` gets a fresh one
    /// instead of the refused one until it expires. Quiet and best effort: git goes on
    /// whatever a helper's `erase` does.
    static func reject(_ request: GitCredentialRequest) {
        guard let password = request.fields["password"], !password.isEmpty else { return }
        _ = DaemonCall.attempt { broker throws(ClientError) in
            try broker.rejectToken(TokenRejectParams(accessToken: password))
        }
    }
}

/// The attributes git sends a credential helper (git-credential(1), "INPUT/OUTPUT FORMAT").
struct GitCredentialRequest {
    var fields: [String: String] = [:]

    init(lines: [String]) {
        for line in lines {
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<eq])
            // Array-valued keys (key[]=) are not used here; the last single value wins.
            fields[key] = String(line[line.index(after: eq)...])
        }
    }

    /// The remote git asks about, protocol://host[/path] (git sends the path only with
    /// `credential.useHttpPath = true`), for the daemon's `git_remote` account rules.
    var remote: String? {
        guard let proto = fields["protocol"], let host = fields["host"], !host.isEmpty else { return nil }
        let path = fields["path"].map { $0.isEmpty ? "" : "/" + $0 } ?? ""
        return "\(proto)://\(host)\(path)"
    }

    /// The resource to ask for, or nil when this helper should stay silent: a protocol
    /// other than https (or http to loopback), or a host that --resource is not for.
    func resource(configured: String?) -> String? {
        guard let proto = fields["protocol"], let host = fields["host"], !host.isEmpty else { return nil }
        let loopback = ["localhost", "127.0.0.1", "[::1]"].contains(Self.hostName(host))
        guard proto == "https" || (proto == "http" && loopback) else { return nil }
        // git sends the port as the remote URL has it (host=git.example.com:443 for
        // https://git.example.com:443/repo) but picks the helper with the default port
        // dropped, so the default port names the same server either way.
        let requested = Self.withoutDefaultPort(host, scheme: proto)
        guard let configured else {
            return "\(proto)://\(requested)"
        }
        // Answer only the host the token is for.
        let configuredScheme = configured.prefix { $0 != ":" }.lowercased()
        guard let configuredHost = Self.authority(of: configured),
              Self.withoutDefaultPort(configuredHost, scheme: configuredScheme) == requested
        else {
            return nil
        }
        return configured
    }

    /// `host[:port]` in lower case, without the port when it is the scheme's default
    /// (443 for https, 80 for http).
    static func withoutDefaultPort(_ authority: String, scheme: String) -> String {
        let lowered = authority.lowercased()
        let name = hostName(lowered)
        let defaultPort = scheme.lowercased() == "http" ? ":80" : ":443"
        return lowered == name + defaultPort ? name : lowered
    }

    /// `host[:port]` of an absolute URL.
    static func authority(of url: String) -> String? {
        let parts = url.split(separator: "://", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let rest = parts[1]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let hostPart = authority.split(separator: "@").last.map(String.init) ?? ""
        return hostPart.isEmpty ? nil : hostPart
    }

    /// The host without its port.
    static func hostName(_ host: String) -> String {
        if host.hasPrefix("[") { return String(host.prefix { $0 != "]" }) + "]" }
        return String(host.prefix { $0 != ":" })
    }
}

/// Reading the helper's input.
enum StandardInput {
    /// Lines from stdin up to a blank line or the end of input, without their newlines.
    static func linesUntilBlank(limit: Int = 64 * 1024) -> [String] {
        var bytes: [UInt8] = []
        var lines: [String] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while total < limit {
            let n = read(STDIN_FILENO, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            total += n
            for byte in buffer[0..<n] {
                if byte == UInt8(ascii: "\n") {
                    var line = String(decoding: bytes, as: UTF8.self)
                    if line.hasSuffix("\r") { line.removeLast() }
                    if line.isEmpty { return lines }
                    lines.append(line)
                    bytes.removeAll(keepingCapacity: true)
                } else {
                    bytes.append(byte)
                }
            }
        }
        if !bytes.isEmpty { lines.append(String(decoding: bytes, as: UTF8.self)) }
        return lines
    }
}
