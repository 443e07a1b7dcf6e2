@testable import BrokerCore
import BrokerCrypto
import BrokerProtocol
import Foundation
import Logging
import OAuth
import SecretStore
import Synchronization
import XCTest

/// The clocks the test moves: the broker's `WallClock` reads them. `advance` is time
/// passing (a suspend too: both clocks move); `stepWall` is the wall clock alone stepped
/// (NTP, an administrator), boot time untouched. Boot time starts far from the wall clock,
/// so that a deadline read on the wrong clock shows.
final class TestClock: Sendable {
    private let seconds = Mutex<(wall: Double, boot: Double)>((1_800_000_000, 5_000))

    var now: Double { seconds.withLock { $0.wall } }
    var boot: Double { seconds.withLock { $0.boot } }
    var reading: ClockReading { seconds.withLock { ClockReading(wall: $0.wall, boot: $0.boot) } }
    var wallClock: WallClock { WallClock(now: { [self] in now }, boottime: { [self] in boot }) }

    func advance(_ by: Double) { seconds.withLock { $0.wall += by; $0.boot += by } }
    func stepWall(_ by: Double) { seconds.withLock { $0.wall += by } }
}

/// A STUB OAuth provider behind the broker's `HTTPTransport`: it answers discovery, the
/// JWKS and the token endpoint from a script, in memory. A real provider (the Glewlwyd of the
/// integration tests) cannot be told to go down, to refuse a grant or to issue a token of
/// a given lifetime on cue, nor be read with a moved clock; those are the cases here.
final class StubTransport: HTTPTransport {
    static let issuer = "https://idp.example"

    /// What the token endpoint does with the next request.
    enum Answer: Sendable {
        /// A token that lives `expiresIn` s; with `rotate`, a new refresh token too.
        case token(expiresIn: Int, rotate: Bool)
        /// A JWT access token (RFC 9068) with `iat` and `exp` = `iat` + `life`, by the
        /// provider's clock, and no `expires_in` (RFC 6749 §5.1 only recommends it) unless given.
        case jwt(issuedAt: Int64, life: Int64, expiresIn: Int? = nil)
        /// HTTP 400 with this OAuth error code.
        case error(String)
        /// HTTP 400 with this OAuth error code and `error_description`.
        case described(String, String)
        /// HTTP 200 with this JSON text as the token answer, as it is.
        case json(String)
    }

    private struct State {
        var down = false
        var script: [Answer] = []
        var standing = Answer.token(expiresIn: 3600, rotate: false)
        var issued = 0
        var tokenRequests: [[String: String]] = []
        var discoveries = 0
        var jwks = #"{"keys":[]}"#
        var idTokens: [String] = []
        var discoveryExtra = ""
        var revocations: [String] = []
        var refusedRevocations: Set<String> = []
        var date: String?
    }

    private let state = Mutex(State())

    /// Every request fails to connect while true.
    var down: Bool {
        get { state.withLock { $0.down } }
        set { state.withLock { $0.down = newValue } }
    }

    /// The answer for every token request once the script has run out.
    func answerAlways(_ answer: Answer) { state.withLock { $0.standing = answer } }

    /// Answers for the next token requests, in order.
    func script(_ answers: Answer...) { state.withLock { $0.script += answers } }

    /// The provider's signing keys, served at its jwks_uri.
    func publish(_ keys: [JWK]) throws {
        struct KeySet: Encodable { var keys: [JWK] }
        let text = String(decoding: try JSONEncoder().encode(KeySet(keys: keys)), as: UTF8.self)
        state.withLock { $0.jwks = text }
    }

    /// Further members of the discovery document, as JSON text starting with a comma.
    var discoveryExtra: String {
        get { state.withLock { $0.discoveryExtra } }
        set { state.withLock { $0.discoveryExtra = newValue } }
    }

    /// ID tokens for the next token answers, one each, in order.
    func attachIDTokens(_ tokens: String...) { state.withLock { $0.idTokens += tokens } }

    /// The tokens of the revocation requests that reached the provider (at `/revoke`, which
    /// `discoveryExtra` may announce), in order, as fingerprints.
    var revocations: [String] { state.withLock { $0.revocations } }

    /// Revocations of these tokens are refused (HTTP 400 `invalid_request`).
    func refuseRevoking(_ tokens: String...) { state.withLock { $0.refusedRevocations.formUnion(tokens) } }

    /// The `Date` header of the token endpoint's answers (the provider's clock), or none.
    var dateHeader: String? {
        get { state.withLock { $0.date } }
        set { state.withLock { $0.date = newValue } }
    }

    /// The form of each token request that reached the provider.
    var tokenRequests: [[String: String]] { state.withLock { $0.tokenRequests } }
    var discoveries: Int { state.withLock { $0.discoveries } }

    func send(_ request: HTTPRequest) async throws(OAuthError) -> HTTPResponse {
        let base = Self.issuer
        switch request.url {
        case base + "/.well-known/openid-configuration":
            guard !down else { throw .unreachable("the STUB provider idp.example is down") }
            state.withLock { $0.discoveries += 1 }
            return Self.json(200, #"{"issuer":"\#(base)","token_endpoint":"\#(base)/token","jwks_uri":"\#(base)/jwks"\#(discoveryExtra)}"#)
        case base + "/jwks":
            guard !down else { throw .unreachable("the STUB provider idp.example is down") }
            return Self.json(200, state.withLock { $0.jwks })
        case base + "/token":
            let form = Self.form(request.body ?? [])
            let response = try tokenAnswer(form)
            guard let date = dateHeader else { return response }
            return HTTPResponse(status: response.status, headers: response.headers.merging(["date": date]) { $1 }, body: response.body)
        case base + "/device":
            // RFC 8628 §3.2, for a discovery document that names it (`discoveryExtra`): a
            // code that lives ten minutes, polled every second.
            guard !down else { throw .unreachable("the STUB provider idp.example is down") }
            return Self.json(200, #"{"device_code":"device-1","user_code":"ABCD-EFGH","verification_uri":"\#(base)/activate","expires_in":600,"interval":1}"#)
        case base + "/revoke":
            let token = Self.form(request.body ?? [])["token"] ?? ""
            let refused = try state.withLock { s throws(OAuthError) -> Bool in
                guard !s.down else { throw .unreachable("the STUB provider idp.example is down") }
                s.revocations.append(fingerprint(token))
                return s.refusedRevocations.contains(token)
            }
            return refused ? Self.json(400, #"{"error":"invalid_request"}"#) : HTTPResponse(status: 200)
        default:
            return HTTPResponse(status: 404)
        }
    }

    /// The token endpoint's answer to `form`, from the script.
    private func tokenAnswer(_ form: [String: String]) throws(OAuthError) -> HTTPResponse {
        let base = Self.issuer
        let answer = try state.withLock { s throws(OAuthError) -> (Answer, Int, String?) in
            guard !s.down else { throw .unreachable("the STUB provider idp.example is down") }
            s.tokenRequests.append(form)
            s.issued += 1
            let answer = s.script.isEmpty ? s.standing : s.script.removeFirst()
            guard case .token = answer, !s.idTokens.isEmpty else { return (answer, s.issued, nil) }
            return (answer, s.issued, s.idTokens.removeFirst())
        }
        switch answer.0 {
        case .token(let expiresIn, let rotate):
            let refresh = rotate ? #","refresh_token":"refresh-\#(answer.1)""# : ""
            let idToken = answer.2.map { #","id_token":"\#($0)""# } ?? ""
            return Self.json(200, #"{"access_token":"access-\#(answer.1)","token_type":"Bearer","expires_in":\#(expiresIn)\#(refresh)\#(idToken)}"#)
        case .jwt(let issuedAt, let life, let expiresIn):
            let claims = #"{"iss":"\#(base)","sub":"sub-alice","jti":"\#(answer.1)","iat":\#(issuedAt),"exp":\#(issuedAt + life)}"#
            let jwt = Base64URL.encode(Array(#"{"alg":"RS256","typ":"at+jwt"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + ".c2ln"
            let stated = expiresIn.map { #","expires_in":\#($0)"# } ?? ""
            return Self.json(200, #"{"access_token":"\#(jwt)","token_type":"Bearer"\#(stated)}"#)
        case .error(let code):
            return Self.json(400, #"{"error":"\#(code)"}"#)
        case .described(let code, let description):
            return Self.json(400, #"{"error":"\#(code)","error_description":"\#(description)"}"#)
        case .json(let text):
            return Self.json(200, text)
        }
    }

    private static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }

    /// The form pairs of a token request; the values used here need no percent-decoding.
    private static func form(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            form[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return form
    }
}

/// A STUB store: the real `MemoryStore` underneath, with saves and reads that can be made
/// to fail or wait (the Secret Service going away or hanging at a given moment cannot be
/// produced on cue) and a log of what was written, in order with what the test notes.
final class StubStore: CredentialStore {
    let memory = MemoryStore()
    private let failing = Mutex(false)
    private let failingReads = Mutex(false)
    /// While set, reads wait here until `releaseReads`.
    private let heldReads = Mutex<(held: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))
    let events = Mutex<[String]>([])

    var kind: String { "memory" }

    /// Saves throw while true.
    func failSaves(_ fail: Bool) { failing.withLock { $0 = fail } }

    /// `check` and `loadAll` throw while true, as with a locked keyring.
    func failReads(_ fail: Bool) { failingReads.withLock { $0 = fail } }

    /// Every read takes this long, as on a busy keyring.
    func slowReads(_ delay: Duration) { readDelay.withLock { $0 = delay } }
    private let readDelay = Mutex(Duration.zero)

    /// Reads wait from now on, as on a keyring that is slow to answer, until `releaseReads`.
    func holdReads() { heldReads.withLock { $0.held = true } }

    /// How many reads wait now.
    var readsWaiting: Int { heldReads.withLock { $0.waiting.count } }

    func releaseReads() {
        let waiting = heldReads.withLock { state in
            state.held = false
            defer { state.waiting = [] }
            return state.waiting
        }
        waiting.forEach { $0.resume() }
    }

    private func read() async throws(StoreError) {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let held = heldReads.withLock { state in
                if state.held { state.waiting.append(c) }
                return state.held
            }
            if !held { c.resume() }
        }
        let delay = readDelay.withLock { $0 }
        if delay > .zero { try? await Task.sleep(for: delay) }
        guard !failingReads.withLock({ $0 }) else { throw .locked("the STUB store is locked") }
    }

    func check() async throws(StoreError) { try await read() }

    func save(_ credential: StoredCredential) async throws(StoreError) {
        guard !failing.withLock({ $0 }) else { throw .unavailable("the STUB store refuses writes") }
        try await memory.save(credential)
        let refresh = AccountSecret.account(from: credential)?.refreshToken ?? ""
        events.withLock { $0.append("saved \(fingerprint(refresh))") }
    }

    func loadAll() async throws(StoreError) -> [StoredCredential] {
        try await read()
        return try await memory.loadAll()
    }

    func delete(_ key: CredentialKey) async throws(StoreError) -> Bool { try await memory.delete(key) }

    /// The refresh token the store holds for the account, as a fingerprint.
    func storedRefreshToken(subject: String) async throws -> String? {
        try await memory.loadAll().first { $0.subject == subject }
            .flatMap(AccountSecret.account(from:)).map { fingerprint($0.refreshToken) }
    }

    func storedAccount(subject: String) async throws -> Account? {
        try await memory.loadAll().first { $0.subject == subject }.flatMap(AccountSecret.account(from:))
    }
}

/// The broker's log lines (level and message, no metadata), for tests of what the log says.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func matching(_ text: String) -> [String] { all.filter { $0.contains(text) } }

    var logger: Logger { Logger(label: "test") { _ in Capture(lines: self) } }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }

    private struct Capture: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            lines.append("\(event.level) \(event.message)")
        }
    }
}

/// Tokens are compared and shown by fingerprint only, as in the integration tests.
func fingerprint(_ token: String) -> String {
    Base64URL.encode(Array(SHA256.hash(Array(token.utf8)).prefix(6)))
}

/// A broker over the stub provider, the stub store and the moved clock, with one account
/// (`alice`, subject `sub-alice`) signed in: its item is put in the store before `start()`,
/// the way the daemon finds accounts after a restart.
struct BrokerHarness {
    let clock = TestClock()
    let transport = StubTransport()
    let store = StubStore()
    let logs = LogLines()
    let broker: Broker

    /// - Parameter alsoSignedIn: subjects of further accounts, with the same username.
    /// - Parameter providerKeys: further lines for `[providers.corp]`.
    /// - Parameter refreshAheadTick: the longest sleep of a background refresh between
    ///   readings of the (moved) clock.
    /// - Parameter storeFailsAtStart: the store refuses reads from the start (as a locked
    ///   keyring); `store.failReads(false)` makes it answer again.
    /// - Parameter extraConfig: further tables of config.toml (another provider).
    /// - Parameter daemonKeys: further lines for `[daemon]`.
    /// - Parameter provider: another STUB provider than `transport`, built on the clock.
    init(refreshMargin: Int = 60, alsoSignedIn: [String] = [], providerKeys: String = "",
         extraConfig: String = "", daemonKeys: String = "", provider: ((TestClock) -> any HTTPTransport)? = nil,
         refreshAheadTick: Duration = .milliseconds(10), storeFailsAtStart: Bool = false) async throws {
        let config = try Self.config(refreshMargin: refreshMargin, providerKeys: providerKeys, daemonKeys: daemonKeys,
                                     extraConfig: extraConfig)
        for subject in ["sub-alice"] + alsoSignedIn {
            let account = Account(
                key: AccountKey(provider: "corp", subject: subject), issuer: StubTransport.issuer, clientID: "authbroker",
                username: "alice", refreshToken: "refresh-0", idToken: nil, state: .ready)
            try await store.memory.save(AccountSecret.credential(for: account))
        }
        broker = Broker(config: config, store: store, transport: provider?(clock) ?? transport, socketPath: "/nonexistent/socket",
                        clock: clock.wallClock, logger: logs.logger,
                        refreshAheadTick: refreshAheadTick, storeRetryInterval: .milliseconds(20))
        store.failReads(storeFailsAtStart)
        await broker.start()
    }

    /// The harness's configuration: one provider, `corp`, with `providerKeys` added to it,
    /// `daemonKeys` to `[daemon]`, and `extraConfig` after it (another provider).
    static func config(refreshMargin: Int = 60, providerKeys: String = "", clientID: String = "authbroker",
                       daemonKeys: String = "", extraConfig: String = "") throws -> BrokerConfig {
        try ConfigLoader.parse("""
            [daemon]
            store = "memory"
            refresh_margin = \(refreshMargin)
            \(daemonKeys)

            [providers.corp]
            issuer = "\(StubTransport.issuer)"
            client_id = "\(clientID)"
            resources = ["https://api", "https://git", "https://other.example"]
            \(providerKeys)

            \(extraConfig)
            """, file: "config.toml")
    }

    /// The token for `params`, as the server asks for it: the cache first, then the full way.
    func token(_ params: TokenGetParams = TokenGetParams()) async throws(BrokerError) -> TokenGetResult {
        if let hit = broker.tokens.cachedToken(params) { return hit }
        return try await broker.tokens.token(params)
    }

    /// The error `token(params)` throws, or nil (a test failure) when it serves a token.
    func tokenError(_ params: TokenGetParams = TokenGetParams(), file: StaticString = #filePath, line: UInt = #line) async -> BrokerError? {
        do {
            let result = try await token(params)
            XCTFail("expected an error, got a token \(fingerprint(result.accessToken))", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }
}

/// The method registrations' policy questions, by method: what the server asks the gate.
struct PolicyQuestions: MethodRegistrar {
    var asks: [RPCMethod: Any] = [:]

    mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>) {
        if case .checked(_, let ask) = spec.access { asks[spec.method] = ask }
    }

    mutating func add(_ spec: SecretAnswerSpec) {
        if case .checked(_, let ask) = spec.access { asks[spec.method] = ask }
    }
}

extension Broker {
    /// The caller policy's decision on `params` of `method`, as the server asks it: the
    /// method's registered question put to the broker's gate.
    @discardableResult
    func authorize<P: Sendable>(_ method: RPCMethod, _ params: P, _ identify: CallerIdentification) throws(BrokerError) -> ConfirmQuestion? {
        var questions = PolicyQuestions()
        register(into: &questions)
        guard let ask = questions.asks[method] as? @Sendable (P) -> PolicyQuestion? else {
            XCTFail("\(method.rawValue) is not checked by the policy with \(P.self)")
            return nil
        }
        return try gate.decide(ask(params), identify: identify)
    }
}
