import BrokerCore
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The steps every request of one method takes, in order: its params read, the caller
/// policy asked (and the request counted once the policy lets it through), then its answer
/// as the method's kind says (`MethodSpec.Answer`, `MethodTable.handler`), with the audit
/// line of a method that gives tokens out. The method table makes one per method.
struct MethodSteps<P: Decodable & Sendable, R: Encodable & Sendable>: Sendable {
    let method: RPCMethod
    /// The params of a request that sends none.
    let empty: P
    /// How the one-pass scanner reads `P`, when it does (`ScannableParams`).
    let scanned: (@Sendable (ScannedRequest) -> P?)?
    /// The policy's question, for a checked method.
    let question: (@Sendable (P) -> PolicyQuestion?)?
    let gate: CallerGate
    let counted: (@Sendable () -> Void)?
    let cancelledOnClose: @Sendable (P) -> Bool
    /// The audit trail's recorder, for a method that gives tokens out when the daemon keeps one.
    let audit: AuditRecorder<P, R>?

    /// A request the caller policy let through.
    struct Admitted {
        let params: P
        /// The `confirm` question the user must answer first, or nil.
        let asked: ConfirmQuestion?
        /// Why it may be served, for the audit line.
        let grant: AuditGrant
        /// The pid of the process that asked (`RequestLine.asker`).
        let asker: Int32?
    }

    init(_ spec: MethodSpec<P, R>, gate: CallerGate, scanned: (@Sendable (ScannedRequest) -> P?)?,
         program: @escaping @Sendable (Int32) -> AuditProgram?) {
        method = spec.method
        empty = spec.empty
        self.scanned = scanned
        question = if case .checked(_, let ask) = spec.access { ask } else { nil }
        self.gate = gate
        counted = spec.counted
        cancelledOnClose = spec.cancelledOnClose
        audit = spec.audit.flatMap { about in gate.audit.map { AuditRecorder(trail: $0, about: about, program: program) } }
    }

    /// Reads the request's params and asks the caller policy; a request it lets through is
    /// counted and answered by `answer`. A request whose params cannot be read, or that the
    /// policy refuses, is answered with the error at once.
    @inline(__always)
    func admit(_ line: RequestLine, _ id: RequestID, _ codec: RPCCodec, _ identify: CallerIdentification,
               _ answers: ConfirmAnswers?, then answer: (Admitted) -> Reply) -> Reply {
        let decoded: P
        if let scan = line.scanned, let read = scanned?(scan) {
            decoded = read
        } else {
            do {
                decoded = try codec.decoder.decode(RequestParams<P>.self, from: line.data).params ?? empty
            } catch {
                return .now(codec.failure(id, RPCError(.invalidParams, "invalid params for \(method.rawValue): \(MethodTable.describe(error))")))
            }
        }
        // The policy is asked before the cache, so a cache hit never skips it.
        var asked: ConfirmQuestion?
        if let question {
            do throws(BrokerError) {
                asked = try gate.decide(question(decoded), identify: identify)
            } catch {
                audit?.refused(decoded, error, pid: line.asker)
                return .now(codec.failure(id, error.rpcError))
            }
        }
        // Counted once the policy lets it through, before the paths that answer it.
        counted?()
        // Why it may be served, for the audit line.
        var grant: AuditGrant = asked == nil ? (gate.isOpen ? .open : .rule) : .confirmed
        if let confirming = asked, answers?.allowed(confirming) == true {
            asked = nil
            grant = .connection
        } else if let confirming = asked, let lease = gate.lease(for: confirming) {
            // A lease the user gave this program answers the question without asking.
            asked = nil
            grant = .lease(lease)
        }
        return answer(Admitted(params: decoded, asked: asked, grant: grant, asker: line.asker))
    }

    /// The answer at once, with the audit line of a method that gives tokens out.
    @inline(__always)
    func served(_ request: Admitted, _ result: R, _ id: RequestID, _ codec: RPCCodec) -> Reply {
        if let audit { codec.lastAudit = audit.served(request.params, result, .served, request.grant, pid: request.asker) }
        return .now(codec.success(id, result))
    }

    /// The answer at once of a method that may refuse it.
    func now(_ request: Admitted, _ id: RequestID, _ codec: RPCCodec, _ answer: () throws(BrokerError) -> R) -> Reply {
        do throws(BrokerError) {
            return served(request, try answer(), id, codec)
        } catch {
            return .now(codec.failure(id, error.rpcError))
        }
    }

    /// A method answered at once that cannot wait for the user (`nowFor`, `subscription`):
    /// a request a `confirm` rule would put to the user is refused, never served unasked.
    func cannotAsk(_ id: RequestID, _ codec: RPCCodec) -> Reply {
        .now(codec.failure(id, RPCError(.forbidden, "\(method.rawValue) is answered at once and cannot wait for your answer to a confirm question; a confirm rule cannot grant it: grant it without confirm in the [[allow]] rules")))
    }

    /// The answer later, as a task: once the user said yes to its `confirm` question, when
    /// it has one, the work of `slow`. The task is cancelled when the connection closes if
    /// the method says so (`cancelledOnClose`).
    func later(_ request: Admitted, _ id: RequestID, _ answers: ConfirmAnswers?,
               _ slow: @escaping @Sendable (P) async throws(BrokerError) -> R) -> Reply {
        let work: @Sendable () async -> Data = { [self] in
            let codec = RPCCodec()
            do throws(BrokerError) {
                let grant = try await confirmed(request, answers)
                return codec.success(id, try await run(request, grant, slow))
            } catch {
                return codec.failure(id, error.rpcError)
            }
        }
        return cancelledOnClose(request.params) ? .untilClosed(work) : .later(work)
    }

    /// Puts the request's `confirm` question to the user when it has one; returns why it is
    /// served (a lease the user gave in the answer, or the grant it came with).
    private func confirmed(_ request: Admitted, _ answers: ConfirmAnswers?) async throws(BrokerError) -> AuditGrant {
        guard let asked = request.asked else { return request.grant }
        // Only a connection under rules has answers; a question elsewhere is a reload's race.
        guard let answers else { throw PeerIdentity.openedBeforeRulesError }
        do throws(BrokerError) {
            switch try await gate.confirm(asked, on: answers) {
            case .once:
                audit?.answered(request.params, .confirmed, grant: nil, pid: request.asker)
                return request.grant
            case .leased(let lease, let seconds):
                audit?.answered(request.params, .leased, grant: .lease(lease), seconds: seconds, pid: request.asker)
                return .lease(lease)
            }
        } catch {
            audit?.denied(request.params, error, pid: request.asker)
            throw error
        }
    }

    /// Runs `slow`. For a method that gives tokens out, the services note what the work did
    /// (a refresh, an exchange) and the audit line of the answer says it.
    private func run(_ request: Admitted, _ grant: AuditGrant,
                     _ slow: @Sendable (P) async throws(BrokerError) -> R) async throws(BrokerError) -> R {
        guard let audit else { return try await slow(request.params) }
        let note = AuditNote()
        let outcome = await AuditNote.$current.withValue(note) { () async -> Result<R, BrokerError> in
            do throws(BrokerError) { return .success(try await slow(request.params)) } catch { return .failure(error) }
        }
        let result = try outcome.get()
        audit.served(request.params, result, note.decision ?? .served, grant, pid: request.asker)
        return result
    }
}
