#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol
import Synchronization

/// A decision on a token, as the audit trail names it (`AuditRecord.decision`).
public enum AuditDecision: String, Sendable {
    /// Served from the daemon's memory (the cache).
    case served
    /// Refreshed at the provider, then served.
    case refreshed
    /// Exchanged at the provider (RFC 8693), then served.
    case exchanged
    /// Refused by the `[[allow]]` rules (-32002).
    case refused
    /// The user's "Allow once" (or Allow) to a `confirm = true` question.
    case confirmed
    /// The user's "Allow for N minutes": a lease.
    case leased
    /// The user's Deny, a question closed or unanswered, or one that could not be asked.
    case denied
}

/// Why a request was served (`AuditRecord.grant`).
public enum AuditGrant: Sendable, Equatable {
    /// No `[[allow]]` rules: every program of the user is served.
    case open
    /// A rule without `confirm`.
    case rule
    /// The user allowed it earlier on the same connection.
    case connection
    /// The user allowed it just now.
    case confirmed
    /// A lease the user gave, by its id.
    case lease(Int)

    var name: String {
        switch self {
        case .open: "open"
        case .rule: "rule"
        case .connection: "connection"
        case .confirmed: "confirmed"
        case .lease: "lease"
        }
    }
}

/// What a decision was about: the method and the token's provider, account, resource and
/// audience, as far as the request or its answer names them. Never a token.
public struct AuditSubject: Sendable, Equatable {
    public var method: RPCMethod
    public var provider: String?
    public var account: String?
    public var resource: String?
    public var audience: String?

    public init(method: RPCMethod, provider: String?, account: String?, resource: String?, audience: String? = nil) {
        self.method = method
        self.provider = provider
        self.account = account
        self.resource = resource
        self.audience = audience
    }
}

/// The program a decision was for: the executable the connecting process runs (as the
/// kernel names it), its pid, and whether it is OpenSSH carrying a forwarded socket.
public struct AuditProgram: Sendable, Equatable {
    public var path: String?
    public var pid: Int32
    public var forwarded: Bool

    public init(path: String?, pid: Int32, forwarded: Bool) {
        self.path = path
        self.pid = pid
        self.forwarded = forwarded
    }
}

/// Where the trail's lines go: the journal (stderr under systemd) or a file of its own.
public protocol AuditSink: Sendable {
    /// Writes one line (`AuditRecord.line`, no newline).
    func write(_ line: String)
}

/// Marks what the work of a request did, for its audit line: the tokens service notes a
/// refresh and the exchange service an exchange, on the `AuditNote` the method table binds
/// around a request's work (`current`). Nothing noted: served from memory.
public final class AuditNote: Sendable {
    private let noted = Mutex<AuditDecision?>(nil)

    public init() {}

    /// The note of the request being worked on; nil outside a request's work.
    @TaskLocal public static var current: AuditNote?

    /// Notes `decision` on the current request's note, if there is one.
    public static func note(_ decision: AuditDecision) {
        current?.noted.withLock { $0 = decision }
    }

    /// What was noted last.
    public var decision: AuditDecision? { noted.withLock { $0 } }
}

/// The audit trail (docs/security.md, "The audit trail"): every decision on a token —
/// served from memory, refreshed, exchanged, refused by the rules, confirmed, leased,
/// denied — as one line (`AuditRecord`) naming the program, the provider, account,
/// resource and audience, never a token.
///
/// Rate-limited so that no program can flood the journal or the file: at most `perProgram`
/// lines a minute for one process and for one executable, and `total` in all; what is
/// past a limit is counted, and one `decision=more count=N` line per program says how many
/// once its minute is over (or at stop, `flush`). A process is counted by its pid (free:
/// the kernel gave it with the connection), and its executable is read only for a line
/// that is written: a process that asks a thousand times a second costs one look at
/// `/proc` a minute.
public final class AuditTrail: Sendable {
    private struct Window {
        var start: Double
        var lines = 0
        var unwritten = 0
        /// The program of a process's window, once read.
        var program: AuditProgram?
    }

    private struct State {
        /// By pid.
        var processes: [Int32: Window] = [:]
        /// By executable path (or "pid N" when it could not be read).
        var programs: [String: Window] = [:]
        var all: Window
        var nextSweep: Double
        /// Whether a sweep is scheduled (`sweepsItself`).
        var sweepScheduled = false
    }

    private let sink: any AuditSink
    private let clock: WallClock
    private let state: Mutex<State>
    public let perProgram: Int
    public let total: Int
    /// The rate limit's window, seconds.
    public let window: Double
    /// Whether the trail writes its "more" lines itself once a window ends (the daemon);
    /// tests call `sweep()`.
    private let sweepsItself: Bool
    /// Processes and programs tracked at once; past it, the oldest windows are let go.
    static let tracked = 4096

    public init(sink: any AuditSink, clock: WallClock = .system, perProgram: Int = 30, total: Int = 600,
                window: Double = 60, sweepsItself: Bool = true) {
        self.sink = sink
        self.clock = clock
        self.perProgram = perProgram
        self.total = total
        self.window = window
        self.sweepsItself = sweepsItself
        let now = clock.now()
        self.state = Mutex(State(all: Window(start: now), nextSweep: now + window))
    }

    /// Records one decision for the process `pid` (nil: unknown), whose program `resolve`
    /// reads only when the line is written.
    public func record(_ decision: AuditDecision, _ subject: AuditSubject, grant: AuditGrant? = nil, seconds: Int? = nil,
                       reason: String? = nil, pid: Int32?, resolve: (Int32) -> AuditProgram?) {
        let now = clock.now()
        let pid = pid ?? 0
        // The process's own limit first: no look at /proc for what is not written.
        let known: AuditProgram?? = state.withLock { s -> AuditProgram?? in
            // Written under the lock, as every line: the sink keeps no lock of ours, and
            // the lines stay in order.
            write(sweepIfDue(&s, now: now))
            var process = s.processes[pid].flatMap { $0.start + window > now ? $0 : nil } ?? Window(start: now)
            if process.lines >= perProgram {
                let key = process.program.map(Self.key) ?? "pid \(pid)"
                s.programs[key, default: Window(start: now, program: process.program ?? AuditProgram(path: nil, pid: pid, forwarded: false))].unwritten += 1
                s.processes[pid] = process
                scheduleSweep(&s)
                return .none
            }
            process.lines += 1
            s.processes[pid] = process
            if s.processes.count > Self.tracked { s.processes = s.processes.filter { $0.value.start + window > now } }
            return .some(process.program)
        }
        guard let known else { return }
        let program = known ?? resolve(pid) ?? AuditProgram(path: nil, pid: pid, forwarded: false)
        state.withLock { s in
            if known == nil, var process = s.processes[pid] {
                process.program = program
                s.processes[pid] = process
            }
            let key = Self.key(program)
            var mine = s.programs[key].flatMap { $0.start + window > now ? $0 : nil } ?? Window(start: now, program: program)
            if let old = s.programs[key], old.start + window <= now, old.unwritten > 0 {
                // A window that ended with entries unwritten: said before the new one starts.
                write([more(old, now: now)])
            }
            if s.all.start + window <= now {
                if s.all.unwritten > 0 { write([more(s.all, now: now)]) }
                s.all = Window(start: now)
            }
            guard mine.lines < perProgram, s.all.lines < total else {
                if mine.lines < perProgram { s.all.unwritten += 1 } else { mine.unwritten += 1 }
                s.programs[key] = mine
                scheduleSweep(&s)
                return
            }
            mine.lines += 1
            s.all.lines += 1
            s.programs[key] = mine
            if s.programs.count > Self.tracked { s.programs = s.programs.filter { $0.value.start + window > now || $0.value.unwritten > 0 } }
            sink.write(AuditRecord(time: now, decision: decision.rawValue, method: subject.method.rawValue, program: program.path,
                               pid: program.pid, forwarded: program.forwarded, provider: subject.provider, account: subject.account,
                               resource: subject.resource, audience: subject.audience, grant: grant?.name,
                               lease: grant.flatMap { if case .lease(let id) = $0 { String(id) } else { nil } },
                               seconds: seconds, reason: reason).line)
        }
    }

    /// Records one decision for a program already known (the gate's own).
    public func record(_ decision: AuditDecision, _ subject: AuditSubject, grant: AuditGrant? = nil, seconds: Int? = nil,
                       reason: String? = nil, program: AuditProgram) {
        record(decision, subject, grant: grant, seconds: seconds, reason: reason, pid: program.pid, resolve: { _ in program })
    }

    /// Writes the "more" line of every window that is over (all of them with `all`).
    public func sweep(all: Bool = false) {
        let now = clock.now()
        state.withLock { s in
            s.sweepScheduled = false
            write(sweepIfDue(&s, now: now, force: true, everything: all))
        }
    }

    /// Writes what is still counted and unwritten: at stop.
    public func flush() { sweep(all: true) }

    // MARK: -

    private static func key(_ program: AuditProgram) -> String { program.path ?? "pid \(program.pid)" }

    /// The line that says how many entries of `window` were counted, not written.
    private func more(_ window: Window, now: Double) -> String {
        let seconds = Int(self.window)
        guard let program = window.program else {
            return AuditRecord(time: now, decision: "more", count: window.unwritten,
                               reason: "past \(total) entries in \(seconds) seconds from all programs: counted, not written one by one").line
        }
        return AuditRecord(time: now, decision: "more", program: program.path, pid: program.path == nil ? program.pid : nil,
                           forwarded: program.forwarded, count: window.unwritten,
                           reason: "past \(perProgram) entries in \(seconds) seconds for this program: counted, not written one by one").line
    }

    /// The "more" lines of the windows that are over, which it lets go, when a sweep is
    /// due (`force`: now); `everything`: of every window, over or not.
    private func sweepIfDue(_ s: inout State, now: Double, force: Bool = false, everything: Bool = false) -> [String] {
        guard force || now >= s.nextSweep else { return [] }
        s.nextSweep = now + window / 4
        var lines: [String] = []
        for (key, w) in s.programs where everything || w.start + window <= now {
            if w.unwritten > 0 { lines.append(more(w, now: now)) }
            if everything { s.programs[key]?.unwritten = 0 } else { s.programs[key] = nil }
        }
        if everything || s.all.start + window <= now {
            if s.all.unwritten > 0 { lines.append(more(s.all, now: now)) }
            s.all = everything ? Window(start: s.all.start, lines: s.all.lines) : Window(start: now)
        }
        s.processes = s.processes.filter { $0.value.start + window > now }
        return lines
    }

    /// Schedules one sweep for when the current windows are over, so that a flood that
    /// stops is still told of without waiting for the next decision.
    private func scheduleSweep(_ s: inout State) {
        guard sweepsItself, !s.sweepScheduled else { return }
        s.sweepScheduled = true
        let after = window
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(after + 1))
            self?.sweep()
        }
    }

    private func write(_ lines: [String]) {
        for line in lines { sink.write(line) }
    }
}
