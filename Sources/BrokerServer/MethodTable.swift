import BrokerCore
import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NIOCore

/// The answer of a method: ready now (served on the event loop), or later.
enum Reply: Sendable {
    case now(Data)
    case later(@Sendable () async -> Data)
    /// Later, and only for as long as the connection is open: the work is cancelled when it
    /// closes (`login.wait`: a sign-in nobody waits for is abandoned).
    case untilClosed(@Sendable () async -> Data)
}

/// Encodes and decodes JSON-RPC messages. One per connection, so nothing is shared
/// between threads and nothing is allocated per request. The JSONDecoder and JSONEncoder
/// are made on first use: a connection that only asks for cached tokens (scanned requests,
/// `JSONWritable` answers) never needs them.
final class RPCCodec {
    lazy var decoder = JSONDecoder()
    lazy var encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    init() {}

    func success<R: Encodable & Sendable>(_ id: RequestID, _ result: R) -> Data {
        if let writable = result as? any JSONWritable { return ResponseWriter.success(id, writable) }
        return (try? encoder.encode(Response(id: id, result: result))) ?? failure(id, RPCError(.internalError, "the result could not be encoded"))
    }

    func failure(_ id: RequestID, _ error: RPCError) -> Data {
        (try? encoder.encode(ErrorResponse(id: id, error: error))) ?? Data(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#.utf8)
    }
}

/// Method name → handler. Each entry decodes its params, may answer at once from a
/// synchronous fast path, and otherwise answers when its async work is done.
/// One request line: as scanned in one pass when the scanner could read it, and its bytes
/// for JSONDecoder otherwise.
struct RequestLine {
    let scanned: ScannedRequest?
    let bytes: ByteBuffer
    var data: Data { Data(bytes.readableBytesView) }
}

struct MethodTable: Sendable {
    /// `answers`: the connection's answers to `confirm` questions (nil where no rule is in
    /// force: the front door's requests).
    typealias Handler = @Sendable (_ line: RequestLine, _ id: RequestID, _ codec: RPCCodec, _ identify: CallerIdentification,
                                   _ answers: ConfirmAnswers?) -> Reply
    private var handlers: [String: Handler] = [:]
    /// The `[[allow]]` policy in force now: with rules, the caller is identified at accept.
    var callerPolicy: @Sendable () -> CallerPolicy = { CallerPolicy() }
    /// Waits for the user's yes to a `confirm = true` rule's question (throws otherwise).
    var confirm: @Sendable (ConfirmQuestion, ConfirmAnswers?) async throws(BrokerError) -> Void = { _, _ throws(BrokerError) in
        throw BrokerError.forbidden(message: "forbidden by policy: nothing can ask the user to confirm")
    }
    /// `cache_misses_per_minute` now (0: no limit), read on each miss.
    var cacheMissesPerMinute: @Sendable () -> Int = { 0 }
    /// Methods whose answers that come later may cost a request to the provider (a token
    /// the cache did not have): counted against the connection's `MissBudget`.
    private var minting: Set<String> = []

    /// Whether a later answer of `method` is a cache miss the connection's budget counts.
    func mints(_ method: String) -> Bool { minting.contains(method) }

    subscript(method: String) -> Handler? { handlers[method] }

    /// Registers a method. `scanned` reads the params of a request the one-pass scanner
    /// read (nil, or a nil result: JSONDecoder reads them). `fast` answers without
    /// suspending (cache hits); returning nil falls through to `slow`. `fastFor` is `fast`
    /// for answers that depend on who asks. `authorize` refuses what the policy does not
    /// grant, or returns the question to ask the user first: then the fast paths are
    /// skipped until the connection's answer is yes.
    mutating func register<P: Decodable & Sendable, R: Encodable & Sendable>(
        _ method: RPCMethod, _ params: P.Type, empty: P,
        scanned: (@Sendable (ScannedRequest) -> P?)? = nil,
        authorize: (@Sendable (CallerIdentification, P) throws(BrokerError) -> ConfirmQuestion?)? = nil,
        fast: (@Sendable (P) -> R?)? = nil,
        fastFor: (@Sendable (CallerIdentification, P) -> R?)? = nil,
        cancelledOnClose: @escaping @Sendable (P) -> Bool = { _ in false },
        mints: Bool = false,
        slow: @escaping @Sendable (P) async throws(BrokerError) -> R
    ) {
        if mints { minting.insert(method.rawValue) }
        let confirm = self.confirm
        handlers[method.rawValue] = { line, id, codec, identify, answers in
            let decoded: P
            if let scan = line.scanned, let read = scanned?(scan) {
                decoded = read
            } else {
                do {
                    decoded = try codec.decoder.decode(RequestParams<P>.self, from: line.data).params ?? empty
                } catch {
                    return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method.rawValue): \(Self.describe(error))")))
                }
            }
            // The policy is asked before the cache, so a cache hit never skips it.
            var question: ConfirmQuestion?
            if let authorize {
                do throws(BrokerError) {
                    question = try authorize(identify, decoded)
                } catch {
                    return .now(codec.failure(id, error.rpcError))
                }
            }
            if let asked = question, answers?.allowed(asked) == true { question = nil }
            if question == nil, let fast, let result = fast(decoded) { return .now(codec.success(id, result)) }
            if question == nil, let fastFor, let result = fastFor(identify, decoded) { return .now(codec.success(id, result)) }
            let work: @Sendable () async -> Data = { [question] in
                let codec = RPCCodec()
                do throws(BrokerError) {
                    if let question { try await confirm(question, answers) }
                    return codec.success(id, try await slow(decoded))
                } catch {
                    return codec.failure(id, error.rpcError)
                }
            }
            return cancelledOnClose(decoded) ? .untilClosed(work) : .later(work)
        }
    }

    /// A decoding error as a short sentence naming the member, never echoing its value.
    static func describe(_ error: any Error) -> String {
        guard let e = error as? DecodingError else { return "not the expected shape" }
        func path(_ c: [any CodingKey]) -> String {
            let p = c.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "params" : p
        }
        switch e {
        case .typeMismatch(let type, let ctx): return "\(path(ctx.codingPath)) must be \(typeName(type))"
        case .valueNotFound(let type, let ctx): return "\(path(ctx.codingPath)) must be \(typeName(type)), not null"
        case .keyNotFound(let key, _): return "\(key.stringValue) is missing"
        case .dataCorrupted(let ctx):
            // A closed set's refusal (`WireEnum`) names the choices, never the value sent.
            if let unknown = ctx.underlyingError as? UnknownWireValue { return "\(path(ctx.codingPath)) \(unknown.requirement)" }
            return "\(path(ctx.codingPath)) is malformed"
        @unknown default: return "not the expected shape"
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Int.Type, is Int64.Type: return "an integer"
        case is [String].Type: return "an array of strings"
        case is Bool.Type: return "true or false"
        default: return "an object"
        }
    }
}

/// `login.answer`'s params without its `value`, which `SecretAnswer` reads.
private struct AnswerTarget: Decodable, Sendable {
    var loginID: String
    enum CodingKeys: String, CodingKey { case loginID = "login_id" }
}

extension MethodTable {
    /// Registers `login.answer`. Its value may be a password: it is read from the line's
    /// bytes into a `SecretBytes` (`SecretAnswer`), never into a String, and the line's
    /// bytes and their copy for JSONDecoder are wiped once read (docs/security.md).
    mutating func registerAnswer(_ answer: @escaping @Sendable (String, SecretBytes) throws(BrokerError) -> LoginAnswerResult) {
        let method = RPCMethod.loginAnswer.rawValue
        handlers[method] = { line, id, codec, _, _ in
            defer { line.bytes.withUnsafeReadableBytes { SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: $0)) } }
            var data = line.data
            defer { data.withUnsafeMutableBytes { SecretBytes.wipe($0) } }
            let target: AnswerTarget
            do {
                guard let params = try codec.decoder.decode(RequestParams<AnswerTarget>.self, from: data).params else {
                    return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method): login_id is missing")))
                }
                target = params
            } catch {
                return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method): \(Self.describe(error))")))
            }
            guard let value = line.bytes.withUnsafeReadableBytes({ SecretAnswer.value(in: $0) }) else {
                return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method): value must be a string")))
            }
            do throws(BrokerError) {
                return .now(codec.success(id, try answer(target.loginID, value)))
            } catch {
                return .now(codec.failure(id, error.rpcError))
            }
        }
    }

    /// The daemon's methods, wired to the broker.
    static func broker(_ broker: Broker) -> MethodTable {
        var t = MethodTable()
        t.callerPolicy = { broker.callerPolicy }
        t.cacheMissesPerMinute = { broker.cacheMissesPerMinute }
        t.confirm = { question, answers throws(BrokerError) in
            // Only a connection under rules has answers; a question elsewhere is a reload's race.
            guard let answers else { throw PeerIdentity.openedBeforeRulesError }
            try await broker.confirm(question, on: answers)
        }
        t.register(.tokenGet, TokenGetParams.self, empty: TokenGetParams(),
                   scanned: { TokenGetParams(scanned: $0) },
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeToken(identify, p) },
                   fast: { broker.cachedToken($0) },
                   // A caller waiting for a sign-in is one of its waiters: gone, it stops waiting.
                   cancelledOnClose: { $0.waitForSignIn != nil },
                   mints: true,
                   slow: { p throws(BrokerError) in try await broker.token(p) })
        t.register(.dpopProof, DPoPProofParams.self, empty: DPoPProofParams(token: TokenGetParams(), htm: "", htu: ""),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeToken(identify, p.token) },
                   fast: { broker.cachedDPoPProof($0) },
                   cancelledOnClose: { $0.token.waitForSignIn != nil },
                   mints: true,
                   slow: { p throws(BrokerError) in try await broker.dpopProof(p) })
        t.register(.tokenExchange, TokenExchangeParams.self, empty: TokenExchangeParams(),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeExchange(identify, p) },
                   fast: { broker.cachedExchange($0) },
                   mints: true,
                   slow: { p throws(BrokerError) in try await broker.exchangeToken(p) })
        t.register(.tokenReject, TokenRejectParams.self, empty: TokenRejectParams(),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeReject(identify, p); return nil },
                   slow: { p throws(BrokerError) in try broker.rejectToken(p) })
        t.register(.accountList, NoParams.self, empty: NoParams(),
                   fast: { _ in broker.accountList() },
                   slow: { _ in broker.accountList() })
        // Always answered at once; what it shows depends on the caller under rules.
        t.register(.daemonStatus, NoParams.self, empty: NoParams(),
                   fastFor: { identify, _ in broker.status(for: identify) },
                   slow: { _ throws(BrokerError) in throw BrokerError.internalError("daemon.status is answered at once") })
        t.register(.loginStart, LoginStartParams.self, empty: LoginStartParams(),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeSignIn(identify, p); return nil },
                   slow: { p throws(BrokerError) in try await broker.startLogin(p) })
        t.register(.loginWait, LoginWaitParams.self, empty: LoginWaitParams(), cancelledOnClose: { _ in true },
                   slow: { p throws(BrokerError) in try await broker.waitLogin(p) })
        t.registerAnswer { id, value throws(BrokerError) in try broker.answerLogin(loginID: id, value: value) }
        t.register(.logout, LogoutParams.self, empty: LogoutParams(),
                   slow: { p throws(BrokerError) in try await broker.logout(p) })
        t.register(.accountWhoami, AccountParams.self, empty: AccountParams(),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeClaims(identify, p); return nil },
                   slow: { p throws(BrokerError) in try broker.whoami(p) })
        t.register(.accountUserinfo, AccountParams.self, empty: AccountParams(),
                   authorize: { identify, p throws(BrokerError) in try broker.authorizeClaims(identify, p); return nil },
                   slow: { p throws(BrokerError) in try await broker.userinfo(p) })
        t.register(.providerSetSecret, SetSecretParams.self, empty: SetSecretParams(clientSecret: ""),
                   slow: { p throws(BrokerError) in try await broker.setClientSecret(p) })
        return t
    }
}
