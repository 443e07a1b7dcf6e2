import BrokerProtocol

/// `WWW-Authenticate` challenges (RFC 9110 §11.6.1), and what a 401 or 403 answer's Bearer
/// or DPoP challenge asks a client to do (RFC 6750 §3, RFC 9728 §5.1, RFC 9470, RFC 9449
/// §7.1 and §9): the same reading and the same decisions as clients/python's
/// `authbroker.challenges` and clients/go's `Decide`. `authctl exec --retry-on-exit` acts on
/// them (``ExecChallenge``). Pure functions; no input makes the parser trap.
struct Challenge: Equatable {
    /// Lowercased: schemes are case-insensitive.
    var scheme: String
    /// Lowercased names, unescaped values; a param a challenge repeats keeps its first value.
    var params: [String: String] = [:]
    /// For a scheme that takes a token68 instead of params.
    var token68: String?

    /// The challenges of `WWW-Authenticate` values (a response may carry the header several
    /// times). Elements that do not parse are skipped, and so are params that follow a
    /// scheme that did not parse.
    static func parse(_ values: [String]) -> [Challenge] {
        var joined: [UInt8] = []
        for (n, value) in values.enumerated() {
            if n > 0 { joined += [UInt8(ascii: ","), UInt8(ascii: " ")] }
            joined += Array(value.utf8)
        }
        return Reader(s: joined).challenges()
    }

    static func parse(_ value: String) -> [Challenge] { parse([value]) }

    private struct Reader {
        let s: [UInt8]

        static func isTchar(_ c: UInt8) -> Bool {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(c)
            }
        }

        static func isToken68(_ c: UInt8) -> Bool {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                return true
            default:
                return "-._~+/".utf8.contains(c)
            }
        }

        static func isOWS(_ c: UInt8) -> Bool { c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") }

        func text(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

        func skipOWS(_ i: Int) -> Int {
            var i = i
            while i < s.count, Self.isOWS(s[i]) { i += 1 }
            return i
        }

        func tokenEnd(_ i: Int) -> Int {
            var i = i
            while i < s.count, Self.isTchar(s[i]) { i += 1 }
            return i
        }

        /// The quoted-string at s[i] == '"': its value and end, nil (end: s.count) when unterminated.
        func quoted(_ i: Int) -> (String?, Int) {
            var out: [UInt8] = []
            var i = i + 1
            while i < s.count {
                var c = s[i]
                if c == UInt8(ascii: "\"") { return (text(out), i + 1) }
                if c == UInt8(ascii: "\\"), i + 1 < s.count {
                    i += 1
                    c = s[i]
                }
                out.append(c)
                i += 1
            }
            return (nil, s.count)
        }

        /// Past the next comma outside a quoted-string (the recovery from a malformed element).
        func nextElement(_ i: Int) -> Int {
            var i = i
            while i < s.count {
                if s[i] == UInt8(ascii: "\"") {
                    i = quoted(i).1
                } else if s[i] == UInt8(ascii: ",") {
                    return i + 1
                } else {
                    i += 1
                }
            }
            return i
        }

        func atEndOfElement(_ i: Int) -> Bool {
            let i = skipOWS(i)
            return i >= s.count || s[i] == UInt8(ascii: ",")
        }

        /// The token or quoted-string at s[i]: nil if there is none.
        func paramValue(_ i: Int) -> (String?, Int) {
            if i < s.count, s[i] == UInt8(ascii: "\"") { return quoted(i) }
            let j = tokenEnd(i)
            return j > i ? (text(s[i..<j]), j) : (nil, i)
        }

        func token68End(_ i: Int) -> Int {
            var j = i
            while j < s.count, Self.isToken68(s[j]) { j += 1 }
            guard j > i else { return i }
            while j < s.count, s[j] == UInt8(ascii: "=") { j += 1 }
            return j
        }

        func challenges() -> [Challenge] {
            var found: [Challenge] = []
            var current: Int?  // the challenge params go to
            var i = 0
            while i < s.count {
                i = skipOWS(i)
                if i < s.count, s[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                let j = tokenEnd(i)
                guard j > i else {
                    current = nil
                    i = nextElement(i)
                    continue
                }
                let name = text(s[i..<j]).lowercased()
                let k = skipOWS(j)
                if k < s.count, s[k] == UInt8(ascii: "=") {  // an auth-param of the current challenge
                    let (value, end) = paramValue(skipOWS(k + 1))
                    if let current, let value, atEndOfElement(end), found[current].params[name] == nil {
                        found[current].params[name] = value
                    }
                    i = nextElement(end)
                    continue
                }
                // A new challenge: its scheme, then 1*SP and a token68 or its first param.
                if j < s.count, !Self.isOWS(s[j]), s[j] != UInt8(ascii: ",") {
                    current = nil
                    i = nextElement(j)
                    continue
                }
                let t = token68End(k)
                if k > j, t > k, atEndOfElement(t) {  // `name=` before a comma is no param
                    found.append(Challenge(scheme: name, token68: text(s[k..<t])))
                    current = nil  // a token68 takes no params
                    i = nextElement(t)
                    continue
                }
                found.append(Challenge(scheme: name))
                current = found.count - 1
                i = k
            }
            return found
        }
    }
}

/// What to do about a 401 or 403 answer.
struct ChallengeDecision: Equatable {
    enum Action: String {
        /// Send again with a DPoP proof carrying `nonce` (RFC 9449 §9).
        case nonce
        /// Only a new sign-in with `acrValues` and/or `maxAge` helps (RFC 9470).
        case userAuthentication = "user_authentication"
        /// Send again with a token for `scopes`, the union of the token's and the server's.
        case moreScopes = "more_scopes"
        /// Reject the token and send again with a fresh one (`invalid_token`).
        case newToken = "new_token"
        /// Resolve the resource's metadata (at `resourceMetadata`, or nil: its well-known
        /// URL; RFC 9728 §5.1), then send again with a token from the server it names.
        case discover
    }

    /// Nil: nothing to try.
    var action: Action?
    /// What the server answered, in words (never with a token).
    var reason: String
    var error: String?
    var scopes: [String]?
    var nonce: String?
    var resourceMetadata: String?
    var acrValues: String?
    var maxAge: String?

    /// Python's `str.isprintable`: no Other (Cc, Cf, Cs, Co, Cn) or Separator but the space.
    static func printable(_ text: String, limit: Int = 200) -> String {
        var kept = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .surrogate, .privateUse, .unassigned, .lineSeparator, .paragraphSeparator:
                continue
            case .spaceSeparator where scalar != " ":
                continue
            default:
                if count == limit { return String(kept) + "…" }
                kept.append(scalar)
                count += 1
            }
        }
        return String(kept)
    }

    /// `401 invalid_token: "The access token expired"`: a challenge in words.
    static func describe(_ status: Int, _ challenge: Challenge?) -> String {
        guard let p = challenge?.params else { return "\(status) without a Bearer or DPoP challenge" }
        guard let error = p["error"] else { return "\(status) without an error code" }
        var words = "\(status) \(printable(error, limit: 64))"
        if let description = p["error_description"], !description.isEmpty {
            words += ": \"\(printable(description))\""
        }
        let named = ["scope", "acr_values", "max_age"].compactMap { key in
            p[key].flatMap { $0.isEmpty ? nil : "\(key) \"\(printable($0))\"" }
        }
        return named.isEmpty ? words : words + " (\(named.joined(separator: ", ")))"
    }

    /// What a 401 or 403 answer's challenges ask for; nil for another status.
    ///
    /// `sentToken`: whether the request carried a token; `scopes` the token's; `dpop`
    /// whether it is DPoP-bound, and `dpopNonce` the answer's `DPoP-Nonce`. Only Bearer and
    /// DPoP challenges count, the scheme of the token first. An error code decides before
    /// `resource_metadata`: that says where the server's metadata is, not what is wrong
    /// with the token. A 401 to a request without a token asks for discovery.
    static func decide(status: Int, _ challenges: [Challenge], sentToken: Bool = true, scopes: [String] = [],
                       dpop: Bool = false, dpopNonce: String? = nil) -> ChallengeDecision? {
        guard status == 401 || status == 403 else { return nil }
        let first = dpop ? "dpop" : "bearer"
        let mine = challenges.filter { $0.scheme == "bearer" || $0.scheme == "dpop" }
        let ours = mine.filter { $0.scheme == first } + mine.filter { $0.scheme != first }
        let c = ours.first { !($0.params["error"] ?? "").isEmpty } ?? ours.first
        let reason = describe(status, c)
        let error = c?.params["error"]
        let metadata = ours.lazy.compactMap { $0.params["resource_metadata"] }.first { !$0.isEmpty }
        switch error {
        case "use_dpop_nonce"?:
            if dpop, let dpopNonce, !dpopNonce.isEmpty {
                return ChallengeDecision(action: .nonce, reason: reason, error: error, nonce: dpopNonce)
            }
            return ChallengeDecision(reason: reason + (dpop ? ", and no DPoP-Nonce header" : ", to a token that is no DPoP token"),
                                     error: error)
        case "insufficient_user_authentication"?:
            let acr = c?.params["acr_values"].flatMap { $0.isEmpty ? nil : printable($0) }
            let age = c?.params["max_age"].flatMap { !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } ? $0 : nil }
            return ChallengeDecision(action: .userAuthentication, reason: reason, error: error, acrValues: acr, maxAge: age)
        case "insufficient_scope"?:
            return moreScopes(reason, asked: c?.params["scope"], have: scopes)
        default:
            break
        }
        if !sentToken, status == 401, error == nil || error == "invalid_token" {
            return ChallengeDecision(action: .discover, reason: reason, error: error, resourceMetadata: metadata)
        }
        if error == "invalid_token" {
            return ChallengeDecision(action: .newToken, reason: reason, error: error)
        }
        if error == nil, let metadata, status == 401 {
            return ChallengeDecision(action: .discover, reason: reason, resourceMetadata: metadata)
        }
        return ChallengeDecision(reason: reason, error: error)
    }

    /// Python's `str.split()`: the words between runs of whitespace.
    static func words(_ text: String) -> [String] {
        text.split(whereSeparator: { $0.isWhitespace }).map(String.init)
    }

    private static func moreScopes(_ reason: String, asked: String?, have: [String]) -> ChallengeDecision {
        let code = "insufficient_scope"
        guard let asked, !asked.isEmpty else {
            return ChallengeDecision(reason: reason + ", naming no scope to ask for", error: code)
        }
        var union: [String] = []
        for scope in have where !union.contains(scope) { union.append(scope) }
        let held = union.count
        for scope in words(asked) where !union.contains(scope) {
            union.append(scope)
        }
        guard union.count > held else {
            return ChallengeDecision(reason: reason + ", and the token has those scopes already", error: code)
        }
        return ChallengeDecision(action: .moreScopes, reason: reason, error: code, scopes: union)
    }
}

/// What a command run by `authctl exec --retry-on-exit` wrote to its challenge file
/// (`$AUTHBROKER_CHALLENGE_FILE`, or `--challenge-file`) about the answer that refused it:
/// the `WWW-Authenticate` value (one a line; a `WWW-Authenticate:` prefix is dropped), or
/// the response's headers as `curl -D FILE` writes them, status line first.
struct WrittenChallenge: Equatable {
    /// The answer's status: a header dump's last status line, else 401.
    var status: Int
    /// The `WWW-Authenticate` values.
    var values: [String]
    /// The header dump's `DPoP-Nonce`.
    var dpopNonce: String?

    /// Nil when nothing but blanks was written.
    static func read(_ text: String) -> WrittenChallenge? {
        // By scalars: "\r\n" is one Character.
        let lines = text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            String(String.UnicodeScalarView(line.last == "\r" ? line.dropLast() : line[...]))
        }
        let filled = lines.map(trimmed).filter { !$0.isEmpty }
        guard let first = filled.first else { return nil }
        guard first.hasPrefix("HTTP/") else {
            return WrittenChallenge(status: 401, values: filled.map { line in
                let (name, value) = header(line)
                return name == "www-authenticate" ? value : line
            })
        }
        // A header dump: curl writes every response of the exchange (a redirect, a 100
        // Continue); the last one is the answer.
        var written = WrittenChallenge(status: 0, values: [])
        for line in filled {
            if line.hasPrefix("HTTP/") {
                let words = line.split(separator: " ")
                written = WrittenChallenge(status: words.count > 1 ? Int(words[1]) ?? 0 : 0, values: [])
                continue
            }
            let (name, value) = header(line)
            if name == "www-authenticate" {
                written.values.append(value)
            } else if name == "dpop-nonce", written.dpopNonce == nil {
                written.dpopNonce = value
            }
        }
        return written
    }

    private static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let start = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
              let end = scalars.lastIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        return String(scalars[start...end])
    }

    /// A header line's lowercased name and value ("" name for a line that is none).
    private static func header(_ line: String) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { return ("", line) }
        let name = line[..<colon]
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }) else { return ("", line) }
        return (name.lowercased(), trimmed(String(line[line.index(after: colon)...])))
    }
}

/// What `authctl exec --retry-on-exit` does when the command exits with that status: its
/// one retry, decided from what the command wrote to its challenge file as a client
/// library decides from a 401 or 403 (``ChallengeDecision``).
enum ExecChallenge {
    enum Plan: Equatable {
        /// Reject the token, run again with a fresh one (also when nothing was written).
        case newToken
        /// Run again with a token for these scopes (the token's and the server's).
        case moreScopes([String])
        /// `discovery.resolve` of the resource (at `resourceMetadata`), reject the token,
        /// run again with a token from the server its metadata names.
        case discover(resourceMetadata: String?)
        /// Run again with a DPoP proof (AUTHBROKER_DPOP) carrying the nonce.
        case nonce(String)
        /// No retry helps: print the sentence, exit with the command's status.
        case stop(String)
        /// Only a new sign-in helps: print the sentence (naming the `authctl login` to
        /// run), exit with status 4.
        case signIn(String)

        /// What the retry was made with, for the sentence of a retry refused too.
        var done: String {
            switch self {
            case .newToken: return "a fresh token"
            case .moreScopes: return "a token for more scopes"
            case .discover: return "a token from the authorization server its metadata names"
            case .nonce: return "a proof with its DPoP nonce"
            case .stop, .signIn: return "no retry"
            }
        }
    }

    /// The subject of the sentences: the request's URL without userinfo, query or fragment
    /// (--url), else "the API".
    static func subject(_ url: String?) -> String {
        guard let url else { return "the API" }
        let bytes = Array(url.utf8)
        var start: Int?
        var i = 0
        while i + 2 < bytes.count {
            if bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"), bytes[i + 2] == UInt8(ascii: "/") {
                start = i + 3
                break
            }
            i += 1
        }
        guard let start else { return "the API" }
        let isEnd = { (c: UInt8) -> Bool in c == UInt8(ascii: "?") || c == UInt8(ascii: "#") }
        var authorityEnd = start
        while authorityEnd < bytes.count, bytes[authorityEnd] != UInt8(ascii: "/"), !isEnd(bytes[authorityEnd]) { authorityEnd += 1 }
        var hostStart = start
        for j in start..<authorityEnd where bytes[j] == UInt8(ascii: "@") { hostStart = j + 1 }
        var pathEnd = authorityEnd
        while pathEnd < bytes.count, !isEnd(bytes[pathEnd]) { pathEnd += 1 }
        let kept: [UInt8] = Array(bytes[..<start]) + Array(bytes[hostStart..<pathEnd])
        return Output.safe(String(decoding: kept, as: UTF8.self))
    }

    /// The retry for what the command wrote (nil: nothing), and the sentence of the
    /// refusal (nil when nothing was written: the command said no more than its status).
    /// `scopes`: the scopes asked for (--scope), else the token's `scope` counts;
    /// `url`: --url, without which authctl makes no DPoP proof.
    static func plan(_ written: WrittenChallenge?, token: TokenGetResult, params: TokenGetParams, url: String?)
        -> (plan: Plan, reason: String?) {
        guard let written else { return (.newToken, nil) }
        let scopes = params.scopes ?? ChallengeDecision.words(token.scope ?? "")
        let dpop = token.tokenType.lowercased() == "dpop"
        guard let d = ChallengeDecision.decide(status: written.status, Challenge.parse(written.values), scopes: scopes,
                                               dpop: dpop, dpopNonce: written.dpopNonce) else {
            return (.newToken, nil)  // no 401 or 403 after all: the command's status says the token was refused
        }
        let reason = "\(subject(url)) refused the command's request with \(d.reason)"
        switch d.action {
        case nil:
            return (.stop(reason), reason)
        case .newToken:
            return (.newToken, reason)
        case .moreScopes:
            return (.moreScopes(d.scopes ?? []), reason)
        case .discover:
            guard params.resource != nil else { return (.stop(reason + ", and no resource was given to discover"), reason) }
            return (.discover(resourceMetadata: d.resourceMetadata), reason)
        case .nonce:
            guard url != nil else {
                return (.stop(reason + ", and authctl exec makes a DPoP proof only for the request --url names"), reason)
            }
            return (.nonce(d.nonce ?? ""), reason)
        case .userAuthentication:
            return (.signIn(signIn(d, reason: reason, params: params)), reason)
        }
    }

    /// The sentence when the command exits with the retry status once more.
    static func refusedAgain(_ written: WrittenChallenge?, status: Int32, after plan: Plan, url: String?, dpop: Bool) -> String {
        if let written, let d = ChallengeDecision.decide(status: written.status, Challenge.parse(written.values), dpop: dpop) {
            return "\(subject(url)) refused the command's request again with \(d.reason), after \(plan.done)"
        }
        return "the command exited \(status) again, after \(plan.done)"
    }

    static func signIn(_ d: ChallengeDecision, reason: String, params: TokenGetParams) -> String {
        let wanted = [("acr_values", d.acrValues), ("max_age", d.maxAge)].compactMap { name, value in value.map { "\(name)=\($0)" } }
        var command = ["authctl", "login"]
        if let resource = params.resource {
            command += ["--resource", resource]
        } else if let provider = params.provider {
            command += ["--provider", provider]
        }
        for w in wanted { command += ["--param", w] }
        let asks = wanted.isEmpty ? "" : " with " + wanted.joined(separator: " and ")
        return "\(reason): it asks for a new sign-in\(asks) (RFC 9470), which authbrokerd does not ask the provider for "
            + "on a program's behalf: run `\(Output.safe(shellJoin(command)))`, then try again"
    }

    /// Python's `shlex.join`: words of safe characters as they are, others in single quotes.
    static func shellJoin(_ words: [String]) -> String {
        words.map { word in
            let safe = !word.isEmpty && word.utf8.allSatisfy(isShellSafe)
            return safe ? word : "'" + word.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\"'\"'") + "'"
        }.joined(separator: " ")
    }

    private static func isShellSafe(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "_@%+=:,./-".utf8.contains(c)
        }
    }
}
