import BrokerCore
import BrokerCrypto
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NIOCore

/// The answer of a method: ready now (served on the event loop), or later.
enum Reply: Sendable {
    case now(Data)
    case later(@Sendable () async -> Data)
    /// Later, and only for as long as the connection is open: the work is cancelled when it
    /// closes (`login.wait`: a sign-in nobody waits for is abandoned).
    case untilClosed(@Sendable () async -> Data)
    /// Ready now, and the connection carries out the change to its subscription before it
    /// writes the answer: the connection is the subscriber (`events.subscribe`). Indirect:
    /// boxed only when made, so every other reply stays as small as it was.
    indirect case subscription(SubscriptionChange, Data)
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

    /// The last `success` that answered a cache hit: what it rests on, and where the part
    /// of its bytes after the id begins. The front door clears it before a request and reads
    /// it after (`AnswerMemo`).
    var lastHit: (stamp: CacheHitStamp, resultStart: Int)?
    /// What the last cache hit served was about, for the audit line of each later answer
    /// the front door's memo gives with its bytes (`AnswerMemo`). Cleared with `lastHit`.
    var lastAudit: AuditSubject?

    init() {}

    func success<R: Encodable & Sendable>(_ id: RequestID, _ result: R) -> Data {
        if let writable = result as? any JSONWritable {
            var resultStart = 0
            let data = ResponseWriter.success(id, writable, resultStart: &resultStart)
            if let stamp = writable.cacheHit { lastHit = (stamp, resultStart) }
            return data
        }
        return (try? encoder.encode(Response(id: id, result: result))) ?? failure(id, RPCError(.internalError, "the result could not be encoded"))
    }

    func failure(_ id: RequestID, _ error: RPCError) -> Data {
        (try? encoder.encode(ErrorResponse(id: id, error: error))) ?? Data(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#.utf8)
    }
}

/// One request line: as scanned in one pass when the scanner could read it, and its bytes
/// for JSONDecoder otherwise.
struct RequestLine {
    let scanned: ScannedRequest?
    private let bytes: Bytes
    /// The pid of the process that wrote it (the connection's, from `SO_PEERCRED`), for the
    /// audit trail; nil when not known (tests).
    var asker: Int32?

    private enum Bytes {
        case buffer(ByteBuffer)
        case borrowed(UnsafeRawBufferPointer)
    }

    /// A line NIO framed, in its buffer.
    init(scanned: ScannedRequest?, bytes: ByteBuffer, asker: Int32? = nil) {
        self.scanned = scanned
        self.bytes = .buffer(bytes)
        self.asker = asker
    }

    /// A line in the front door's read buffer, read where it lies: no copy per request.
    /// Valid only while the handler runs, which is all a handler reads it for (the work of
    /// a later answer keeps the decoded params, never the line).
    init(scanned: ScannedRequest?, borrowing bytes: UnsafeRawBufferPointer, asker: Int32? = nil) {
        self.scanned = scanned
        self.bytes = .borrowed(bytes)
        self.asker = asker
    }

    /// Calls `body` with the line's bytes.
    func withUnsafeBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        switch bytes {
        case .buffer(let buffer): buffer.withUnsafeReadableBytes(body)
        case .borrowed(let raw): body(raw)
        }
    }

    var data: Data { withUnsafeBytes { Data($0) } }
}

/// Params the one-pass scanner reads (`RequestScanner`): a server concern keyed by the
/// params type, so services declare their methods without knowing of the scanner.
protocol ScannableParams {
    /// The params of a scanned request, or nil to take the JSONDecoder path.
    init?(scanned request: ScannedRequest)
}

extension TokenGetParams: ScannableParams {}


/// Method name → handler, built from the services' registrations (`MethodSpec`,
/// `Broker.register(into:)`). Each handler decodes its params, asks the caller policy
/// (`CallerGate`) what the method's `Access` says, then answers as the method's kind says
/// (`MethodSpec.Answer`: at once, later, at once when it can, or a subscription the
/// connection carries out). The policy is asked here and only here, for every path: the
/// front door's requests meet the same handlers.
struct MethodTable: MethodRegistrar, Sendable {
    /// `answers`: the connection's answers to `confirm` questions (nil where no rule is in
    /// force: the front door's requests).
    typealias Handler = @Sendable (_ line: RequestLine, _ id: RequestID, _ codec: RPCCodec, _ identify: CallerIdentification,
                                   _ answers: ConfirmAnswers?) -> Reply
    private var handlers: [String: Handler] = [:]
    /// The caller policy, asked about every request before any service.
    let gate: CallerGate
    /// The `[[allow]]` policy in force now: with rules, the caller is identified at accept.
    let callerPolicy: @Sendable () -> CallerPolicy
    /// Whether a cache hit's answer still stands (`TokensService.stillServes`), counting
    /// the hit when it does; nil (no memo of answers) where no broker stands behind the table.
    var stillServes: (@Sendable (CacheHitStamp) -> Bool)?
    /// `cache_misses_per_minute` now (0: no limit), read on each miss.
    var cacheMissesPerMinute: @Sendable () -> Int = { 0 }
    /// Reads the program a pid runs, for an audit line about to be written (`AuditTrail`
    /// asks only then): the executable's path and whether it is OpenSSH's.
    var program: @Sendable (Int32) -> AuditProgram? = { _ in nil }
    /// Methods whose answers that come later may cost a request to the provider (a token
    /// the cache did not have): counted against the connection's `MissBudget`.
    private var minting: Set<String> = []
    /// Every registered method and who may call it, for docs and tests.
    private(set) var access: [RPCMethod: MethodAccess] = [:]

    /// Who may call a registered method, as its registration says.
    enum MethodAccess: Sendable, Equatable {
        case checked(String)
        case open(String)
    }

    /// - Parameter gate: the caller policy; without one, no rules (every caller served).
    init(gate: CallerGate = CallerGate(source: FixedPolicy(), confirmer: nil, logger: Logger(label: "authbroker.policy"))) {
        self.gate = gate
        self.callerPolicy = { gate.policy }
    }

    /// Whether a later answer of `method` is a cache miss the connection's budget counts.
    func mints(_ method: String) -> Bool { minting.contains(method) }

    subscript(method: String) -> Handler? { handlers[method] }

    private mutating func note<P>(_ method: RPCMethod, _ access: Access<P>) {
        switch access {
        case .checked(let what, _): self.access[method] = .checked(what)
        case .open(let reason): self.access[method] = .open(reason)
        }
    }

    /// Installs a service's method. The scanned reading of its params, when the scanner
    /// reads them (`ScannableParams`), is chosen here, once.
    /// Specialised for `token.get`: services register through the generic `MethodRegistrar`,
    /// so without it the handler of every cache hit ran as unspecialised generic code
    /// (metadata lookups, value witnesses, a dynamic cast to `JSONWritable` per answer).
    @_specialize(exported: false, where P == TokenGetParams, R == TokenGetResult)
    mutating func add<P: Decodable & Sendable, R: Encodable & Sendable>(_ spec: MethodSpec<P, R>) {
        note(spec.method, spec.access)
        if spec.mints { minting.insert(spec.method.rawValue) }
        let steps = MethodSteps(spec, gate: gate, scanned: Self.scanner(for: P.self), program: program)
        handlers[spec.method.rawValue] = Self.handler(spec.answer, steps)
    }

    /// The handler of each kind of answer: one closure per kind, chosen here, so a request
    /// goes straight to its kind's path. A request the user must first confirm is answered
    /// later, after the user's yes.
    @_specialize(exported: false, where P == TokenGetParams, R == TokenGetResult)
    private static func handler<P, R>(_ answer: MethodSpec<P, R>.Answer, _ steps: MethodSteps<P, R>) -> Handler {
        switch answer {
        case .nowOrLater(let fast, let slow):
            return { line, id, codec, identify, answers in
                steps.admit(line, id, codec, identify, answers) { request in
                    if request.asked == nil, let result = fast(request.params) { return steps.served(request, result, id, codec) }
                    return steps.later(request, id, answers, slow)
                }
            }
        case .later(let slow):
            return { line, id, codec, identify, answers in
                steps.admit(line, id, codec, identify, answers) { steps.later($0, id, answers, slow) }
            }
        case .now(let now):
            return { line, id, codec, identify, answers in
                steps.admit(line, id, codec, identify, answers) { request in
                    guard request.asked == nil else { return steps.later(request, id, answers) { p throws(BrokerError) in try now(p) } }
                    return steps.now(request, id, codec) { () throws(BrokerError) in try now(request.params) }
                }
            }
        case .nowFor(let now):
            return { line, id, codec, identify, answers in
                steps.admit(line, id, codec, identify, answers) { request in
                    guard request.asked == nil else { return steps.cannotAsk(id, codec) }
                    return steps.now(request, id, codec) { () throws(BrokerError) in try now(identify, answers, request.params) }
                }
            }
        case .subscription(let change):
            return { line, id, codec, identify, answers in
                steps.admit(line, id, codec, identify, answers) { request in
                    guard request.asked == nil else { return steps.cannotAsk(id, codec) }
                    do throws(BrokerError) {
                        let (what, result) = try change(request.params)
                        return .subscription(what, codec.success(id, result))
                    } catch {
                        return .now(codec.failure(id, error.rpcError))
                    }
                }
            }
        }
    }

    /// How the scanner reads `P`, when it does. The params type is opened here, once: the
    /// reading casts the scanner's concrete `S` to `P` (the same type), which boxes nothing.
    private static func scanner<P>(for: P.Type) -> (@Sendable (ScannedRequest) -> P?)? {
        guard let type = P.self as? any (ScannableParams & Sendable).Type else { return nil }
        func reader<S: ScannableParams & Sendable>(_: S.Type) -> @Sendable (ScannedRequest) -> P? {
            { request in S(scanned: request) as? P }
        }
        return reader(type)
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
    /// Installs `login.answer`. Its value may be a password: it is read from the line's
    /// bytes into a `SecretBytes` (`SecretAnswer`), never into a String, and the line's
    /// bytes and their copy for JSONDecoder are wiped once read (docs/security.md).
    mutating func add(_ spec: SecretAnswerSpec) {
        let method = spec.method.rawValue
        note(spec.method, spec.access)
        let question: (@Sendable (String) -> PolicyQuestion?)? = if case .checked(_, let ask) = spec.access { ask } else { nil }
        let (gate, answer) = (self.gate, spec.answer)
        handlers[method] = { line, id, codec, identify, _ in
            defer { line.withUnsafeBytes { SecretBytes.wipe(UnsafeMutableRawBufferPointer(mutating: $0)) } }
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
            if let question {
                do throws(BrokerError) {
                    // No confirm question for an answer: only token grants ask the user.
                    _ = try gate.decide(question(target.loginID), identify: identify)
                } catch {
                    return .now(codec.failure(id, error.rpcError))
                }
            }
            guard let value = line.withUnsafeBytes({ SecretAnswer.value(in: $0) }) else {
                return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method): value must be a string")))
            }
            do throws(BrokerError) {
                return .now(codec.success(id, try answer(target.loginID, value)))
            } catch {
                return .now(codec.failure(id, error.rpcError))
            }
        }
    }

    /// The daemon's methods, as the services register them, behind the broker's caller gate.
    /// `inspector` reads the program of a pid for the audit trail.
    static func broker(_ broker: Broker, inspector: ProcessInspector = .direct) -> MethodTable {
        var t = MethodTable(gate: broker.gate)
        t.program = { pid in
            let view = inspector.view(of: pid, namespaces: false)
            guard view.executableID != nil || view.executable != nil else { return nil }
            return AuditProgram(path: view.executable, pid: pid, forwarded: view.executableID.map(Forwarders.identify) ?? false)
        }
        let providers = broker.providers
        t.cacheMissesPerMinute = { providers.cacheMissesPerMinute }
        let tokens = broker.tokens
        t.stillServes = { tokens.stillServes($0) }
        broker.register(into: &t)
        return t
    }
}

/// Writes a method's decisions to the audit trail: what each is about from the method's
/// registration (`MethodSpec.audit`), the program from the request's pid, read only for a
/// line that is written.
struct AuditRecorder<P, R>: Sendable {
    let trail: AuditTrail
    let about: @Sendable (P, R?) -> AuditSubject
    let program: @Sendable (Int32) -> AuditProgram?

    /// Served (from memory, refreshed, exchanged); returns what it was about.
    @discardableResult
    func served(_ params: P, _ result: R, _ decision: AuditDecision, _ grant: AuditGrant, pid: Int32?) -> AuditSubject {
        let subject = about(params, result)
        trail.record(decision, subject, grant: grant, pid: pid, resolve: program)
        return subject
    }

    /// Refused by the rules (only a policy refusal is a decision; a request the rules
    /// could not be asked about is not).
    func refused(_ params: P, _ error: BrokerError, pid: Int32?) {
        guard case .forbidden(let message) = error else { return }
        trail.record(.refused, about(params, nil), reason: message, pid: pid, resolve: program)
    }

    /// The user's yes: once, or a lease of `seconds`.
    func answered(_ params: P, _ decision: AuditDecision, grant: AuditGrant?, seconds: Int? = nil, pid: Int32?) {
        trail.record(decision, about(params, nil), grant: grant, seconds: seconds, pid: pid, resolve: program)
    }

    /// Anything but a yes to the question.
    func denied(_ params: P, _ error: BrokerError, pid: Int32?) {
        trail.record(.denied, about(params, nil), reason: error.message, pid: pid, resolve: program)
    }
}
