#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrokerCrypto
import BrokerProtocol
import CLinux
import Logging
import NIOCore

/// The daemon's accept path: one thread with its own epoll accepts every connection and
/// answers, straight from the socket, each request that is answered at once (a cached
/// token, a DPoP proof of one, the status); it hands everything else to NIO's pipeline
/// (`Handover`), from where NIO goes on as if it had accepted the connection itself.
///
/// Why: most callers connect, ask for one token and hang up (shell scripts, credential
/// helpers, oidc-agent's way). Through NIO each such connection cost ~100 000 instructions
/// and 11 system calls of channel set-up on top of the request (docs/performance.md). Here
/// it costs `accept4`, `SO_PEERCRED`, the `read`, the `sendmsg`, one `epoll_ctl` to see
/// the hang-up, and the `close`.
///
/// What the front door keeps to itself is only what it can answer at once, one request
/// line per read; a connection that needs more (a refresh or sign-in, a subscription, a
/// line in pieces, pipelined lines, a malformed or oversized request, another user, any
/// connection while `[[allow]]` rules are in force, one over `max_connections`) goes to NIO
/// with what was read of it, and NIO answers it exactly as before.
///
/// It is the fast path of the one connection lifecycle (`ConnectionLifecycle`), not a
/// second server: each connection it holds carries that lifecycle's value, and the idle,
/// stall, back-pressure and half-close rules are the lifecycle's, and the caps and the
/// counting are in `ConnectionRules` (which NIO's pipeline calls too); the front door reports the socket's
/// events to the lifecycle and carries out the actions it returns.
///
/// All mutable state belongs to the front door's thread; `stop()` only signals it (an
/// eventfd) and waits for it to end.
final class FrontDoor: @unchecked Sendable {
    /// One connection the front door holds: between requests, or with an answer the socket
    /// did not take yet.
    final class Connection {
        let fd: CInt
        /// Where the connection is in its lifecycle; the front door acts on what it says.
        var life: ConnectionLifecycle
        /// Answer bytes the socket did not take yet; reading waits until they are out.
        var unsent: [UInt8] = []
        /// In the front door's epoll set.
        var registered = false
        /// The peer's process, for work that shows the user who asks; 0 when unknown.
        var pid: pid_t = 0
        /// Names this connection's requests to the refresh queue, which takes turns between
        /// connections (`RequestOrigin`).
        lazy var origin = RequestOrigin.next()
        /// What the connection's token work may still cost at the providers, made on its first
        /// cache miss (`allowance(perMinute:)`).
        var madeAllowance: ConnectionAllowance?

        init(fd: CInt, limits: ConnectionLimits, now: UInt64) {
            self.fd = fd
            self.life = ConnectionLifecycle(limits: limits, now: now)
        }
    }

    /// What the front door reads and answers requests with: the read buffer, the codec the
    /// handlers write with, and the memo of the last cache hits' answers.
    final class Scratch {
        /// One read's worth: a request line longer than this goes to NIO, which frames it.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
        let codec = RPCCodec()
        /// The last cache hits' answers, for the same requests again (`AnswerMemo`).
        var memo = AnswerMemo()

        deinit {
            buffer.deallocate()
        }
    }

    let listening: CInt
    private let poller: Poller
    let table: MethodTable
    /// The server's rules for connections (caps, counting), and what its connections
    /// report to (`rules.server`: counters, activity, refusals, logger).
    let rules: ConnectionRules
    /// Gives a connection to NIO (`BrokerServer.handOver`).
    let handOver: @Sendable (CInt, Handover) -> Void
    /// Answers worked on for connections the front door keeps (`startWork`).
    let later: LaterAnswers
    let held: HeldConnections
    /// What requests are read and answered with, one at a time on the front door's thread.
    let scratch = Scratch()
    private var thread: pthread_t?
    /// The descriptor held for refusals when the process runs out of them.
    private let refusals: AcceptRefusals

    /// - Parameter listening: a listening, non-blocking Unix stream socket.
    init(listening: CInt, table: MethodTable, limits: ConnectionLimits, server: ServerContext,
         handOver: @escaping @Sendable (CInt, Handover) -> Void) throws(ServerError) {
        self.listening = listening
        self.table = table
        rules = ConnectionRules(limits: limits, server: server)
        self.handOver = handOver
        held = HeldConnections(limits: limits)
        refusals = AcceptRefusals()
        later = try LaterAnswers(inspector: server.inspector)
        poller = try Poller(listening: listening, finished: later.wake)
    }

    deinit {
        poller.close()
    }

    /// Starts the front door's thread.
    func start() throws(ServerError) {
        let me = Unmanaged.passRetained(self).toOpaque()
        var t = pthread_t()
        let r = pthread_create(&t, nil, { arg in
            guard let arg else { return nil }
            let door = Unmanaged<FrontDoor>.fromOpaque(arg).takeRetainedValue()
            clinux_name_thread("authbroker-door")
            door.askForShortSlices()
            door.run()
            return nil
        }, me)
        guard r == 0 else {
            Unmanaged<FrontDoor>.fromOpaque(me).release()
            throw ServerError(description: "cannot start the thread that accepts connections: \(String(cString: strerror(r)))")
        }
        thread = t
    }

    /// The time slice the front door's thread asks for: 0.3 ms, against the 1.4 ms other
    /// programs get by default on two CPUs (EEVDF: 0.7 ms × (1 + log2 CPUs)).
    ///
    /// Why: a thread woken on a CPU busy with another program (a build, on every core)
    /// waits until the scheduler deems it due, often the next 4 ms tick; traced, the slow
    /// first requests after a quiet spell were the front door woken at once and left
    /// runnable for milliseconds behind a CPU-bound program, for an answer it computes in
    /// ~0.15 ms (docs/performance.md, "The first request after 60 s"). A shorter slice
    /// gives it an earlier deadline, so a woken front door runs at once. Not the kernel's
    /// shortest (0.1 ms): a quiet request's cold path runs 0.1–0.25 ms per wake-up, and a
    /// thread past its slice is preempted by the next program that wakes, which traced
    /// once as 3.4 ms lost in the middle of an answer. Its share of the CPU is unchanged
    /// (that is its weight, its nice value): it is taken in shorter turns.
    static let slice: UInt64 = 300_000

    /// Asks for ``slice`` (Linux 6.12 or later; older kernels keep their default). A
    /// refusal (a system-call filter without `sched_setattr`) costs only the latency above:
    /// said once, at debug level.
    private func askForShortSlices() {
        let r = clinux_request_slice(Self.slice)
        if r != 0 {
            rules.server.logger.debug("the front door keeps the default time slice", metadata: ["error": "\(String(cString: strerror(-r)))"])
        }
    }

    /// Stops accepting, closes the connections it holds between requests, writes the answers
    /// still being worked on as they come (for at most ``stopGrace``), and waits for the
    /// thread to end. The listening socket stays open: its owner closes it.
    func stop() {
        guard let t = thread else { return }
        thread = nil
        poller.signal()
        pthread_join(t, nil)
    }

    /// How long `stop` waits for answers being worked on: as long as the daemon waits for
    /// its requests in flight when it stops (`Lifecycle.stopServing`), so that a caller
    /// whose token is being refreshed gets it, as one on NIO's connections does.
    static let stopGrace: UInt64 = 10_000_000_000

    private func run() {
        var fds = [CInt](repeating: 0, count: 64)
        var events = [UInt32](repeating: 0, count: 64)
        /// When the answers still owed stop being waited for, once `stop` was asked.
        var stopping: UInt64?
        while true {
            // Nothing to time out: sleep until something happens. Otherwise wake at least
            // once a second to close idle connections.
            let timeout: CInt = stopping != nil ? 50 : held.isEmpty ? -1 : 1000
            let n = clinux_epoll_wait(poller.epoll, &fds, &events, 64, timeout)
            if n < 0 {
                if errno == EINTR { continue }
                rules.server.logger.critical("cannot wait for connections; no more are accepted", metadata: ["error": "\(String(cString: strerror(errno)))"])
                return
            }
            for i in 0..<Int(n) {
                let fd = fds[i]
                if fd == listening {
                    accept()
                } else if fd == later.wake {
                    deliverFinished()
                } else if fd == poller.wake {
                    _ = clinux_epoll_ctl(poller.epoll, EPOLL_CTL_DEL, listening, 0)
                    stopping = ServerActivity.monotonicNanoseconds() &+ Self.stopGrace
                } else if let connection = held[fd] {
                    service(connection, events: events[i])
                }
            }
            if let stopping {
                // Only the answers being worked on are waited for, and not for long.
                let late = ServerActivity.monotonicNanoseconds() >= stopping
                for connection in held.all where late || !connection.life.answersOwed { hangUp(connection) }
                if held.isEmpty { return }
                continue
            }
            if !held.isEmpty, let due = held.sweep(now: ServerActivity.monotonicNanoseconds()) {
                for (connection, action) in due { perform(connection, action) }
            }
        }
    }

    /// Takes up to four new connections (one wake-up serves a burst, a lone client's answer
    /// goes out before the accept that finds the queue empty).
    private func accept() {
        for _ in 0..<4 {
            let fd = clinux_accept(listening)
            guard fd >= 0 else {
                switch errno {
                case EAGAIN, EWOULDBLOCK: return
                case EINTR, ECONNABORTED: continue
                case EMFILE where refusals.hasSpare, ENFILE where refusals.hasSpare:
                    refuseQueued()
                    continue
                default:
                    // Out of descriptors (EMFILE, ENFILE) or memory: the queue stays full and
                    // the socket readable; pause briefly instead of spinning, say so rarely.
                    refusals.acceptFailed(errno, logger: rules.server.logger)
                    usleep(10_000)
                    return
                }
            }
            admit(fd)
        }
    }

    /// A new connection: kept when its peer is the daemon's user, no rule is in force and a
    /// slot is free; otherwise NIO takes it as it is and answers as before (a refusal, the
    /// limit, the identity read under rules).
    private func admit(_ fd: CInt) {
        // Another user's connection goes to NIO too, which refuses it.
        guard let peer = PeerCredentials.credentials(ofDescriptor: fd), peer.uid == PeerCredentials.daemonUID
        else { return handOver(fd, Handover(descriptor: fd)) }
        // Over the limit, refused here and at once, rules or not: it holds no descriptor.
        if let refusal = rules.refusal(connectingWith: rules.server.activity.openConnections) { return refuse(fd, refusal) }
        guard table.gate.isOpen else { return handOver(fd, Handover(descriptor: fd)) }
        rules.server.activity.opened()
        let connection = held.add(fd, now: ServerActivity.monotonicNanoseconds())
        connection.pid = peer.pid
        // The client has usually written its request by the time the daemon woke up.
        guard perform(connection, connection.life.inputArrived()) else { return }
        // An answer the socket did not take whole waits for the socket to drain: keep
        // watching for that too, or it would wait until the stall timeout cut it off.
        register(connection, events: connection.unsent.isEmpty ? Self.watched : Self.watched | EPOLLOUT.rawValue)
    }

    /// Out of descriptors with callers queued: gives up the spare descriptor for one
    /// `accept`, tells that caller why it is refused, and takes the spare back. Without it
    /// the queue would stay full and every caller in it would wait for nothing.
    private func refuseQueued() {
        refusals.withSpareGivenUp {
            let fd = clinux_accept(listening)
            if fd >= 0 {
                rules.server.refusals.refused("out of file descriptors; refusing connections", [:], logger: rules.server.logger)
                refuse(fd, RPCError(.overloaded, "authbrokerd is out of file descriptors; close some connections and try again, or raise its LimitNOFILE"))
            } else {
                usleep(10_000)  // nothing to take after all: do not spin
            }
        }
    }

    /// Answers a connection it will not serve with one error line and closes it at once.
    /// What the caller already sent is read first, so that the close does not reset the
    /// connection before the caller has read the answer.
    private func refuse(_ fd: CInt, _ error: RPCError) {
        rules.server.counters.errors.increment()
        var line = scratch.codec.failure(.null, error)
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        // A few reads at most: a caller that keeps writing must not hold the thread.
        var read = 0
        for _ in 0..<4 {
            let n = recv(fd, scratch.buffer.baseAddress, scratch.buffer.count, CInt(MSG_DONTWAIT))
            read = max(read, n)
            guard n == scratch.buffer.count else { break }
        }
        // What it sent may be a login.answer's value (a password): not left in the read
        // buffer, of which the next request overwrites only as much as it is long.
        if read > 0 { SecretBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: scratch.buffer[0..<read])) }
        Glibc.close(fd)
    }

    /// Input, the peer's hang-up, and errors; edge-triggered (a read that returns less than
    /// the buffer drained the socket).
    static let watched = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue

    /// Adds the connection to the epoll set, or changes what it watches.
    func register(_ connection: Connection, events: UInt32) {
        let op = connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
        guard clinux_epoll_ctl(poller.epoll, op, connection.fd, events) == 0 else {
            rules.server.logger.error("cannot watch a connection; closing it", metadata: ["error": "\(String(cString: strerror(errno)))"])
            return hangUp(connection)
        }
        connection.registered = true
    }

    /// Reports one wake-up's events to the connection's lifecycle and does what it says.
    private func service(_ connection: Connection, events: UInt32) {
        if events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { connection.life.peerClosedWriting() }
        if events & EPOLLOUT.rawValue != 0, !connection.unsent.isEmpty {
            guard flush(connection) else { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            guard perform(connection, connection.life.inputArrived()) else { return }
        }
        perform(connection, connection.life.settled())
    }

    /// Carries out what the connection's lifecycle said. Returns false when the connection
    /// is no longer the front door's (closed, handed over).
    @discardableResult
    func perform(_ connection: Connection, _ action: ConnectionLifecycle.Action) -> Bool {
        switch action {
        case .none:
            return held[connection.fd] != nil
        case .read:
            return readRequest(connection)
        case .close(let reason):
            if reason == .notReading { rules.server.logger.info("closing a connection that does not read its answers") }
            hangUp(connection)
            return false
        }
    }

    /// Closes a connection the front door holds.
    func hangUp(_ connection: Connection) {
        guard held.remove(connection) else { return }
        _ = Glibc.close(connection.fd)
        connection.life.closed()
        rules.server.activity.closed()
    }

    /// Gives a connection the front door holds to NIO, with what it did on it. Every such
    /// connection was accepted without rules (under rules the front door keeps none).
    func give(_ connection: Connection, _ handover: Handover) {
        guard held.remove(connection) else { return }
        var handover = handover
        handover.descriptor = connection.fd
        handover.acceptedWithoutRules = true
        if connection.registered { _ = clinux_epoll_ctl(poller.epoll, EPOLL_CTL_DEL, connection.fd, 0) }
        connection.life.handedOver()
        // NIO counts it again when its pipeline becomes active.
        rules.server.activity.closed()
        handOver(connection.fd, handover)
    }
}
