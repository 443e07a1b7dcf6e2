#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
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
/// All mutable state belongs to the front door's thread; `stop()` only signals it (an
/// eventfd) and waits for it to end.
final class FrontDoor: @unchecked Sendable {
    /// Limits of the connections the front door holds: the same settings as NIO's
    /// (`ConnectionGuard`), in nanoseconds.
    struct Limits: Sendable {
        var maxConnections: Int
        var idleTimeout: UInt64
        var stallTimeout: UInt64
    }

    /// One connection the front door holds: between requests, or with an answer the socket
    /// did not take yet.
    final class Connection {
        let fd: CInt
        /// When the connection last read or wrote (CLOCK_MONOTONIC ns).
        var lastActive: UInt64
        /// Answer bytes the socket did not take yet; reading waits until they are out.
        var unsent: [UInt8] = []
        var unsentSince: UInt64 = 0
        /// Input was signalled while answers waited: read it once they are out.
        var inputWaiting = false
        /// Close once the unsent bytes are out.
        var closeWhenSent = false
        /// The peer closed its writing side: once what it sent is answered, the connection
        /// closes (edge-triggered, the hang-up is not reported again after the read that
        /// took the last request).
        var peerDone = false
        /// In the front door's epoll set.
        var registered = false

        init(fd: CInt, now: UInt64) {
            self.fd = fd
            self.lastActive = now
        }
    }

    let listening: CInt
    private let epoll: CInt
    private let wake: CInt
    let table: MethodTable
    let counters: BrokerCounters
    let activity: ServerActivity
    let logger: Logger
    let limits: Limits
    /// Gives a connection to NIO (`BrokerServer.handOver`).
    let handOver: @Sendable (CInt, Handover) -> Void
    var connections: [CInt: Connection] = [:]
    /// One read's worth: a request line longer than this goes to NIO, which frames it.
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    let codec = RPCCodec()
    private var thread: pthread_t?
    private var lastSweep: UInt64 = 0
    private var lastAcceptError: UInt64 = 0
    /// A descriptor held in reserve: when the process runs out, it is given up for the one
    /// `accept` that takes a queued caller, who hears why it is refused (`refuseQueued`).
    private var spare: CInt
    /// Connections refused over `max_connections` or for want of descriptors: one log
    /// line per interval with a count, however many there are.
    let overLimit = RefusalLog()

    /// - Parameter listening: a listening, non-blocking Unix stream socket.
    init(listening: CInt, table: MethodTable, counters: BrokerCounters, activity: ServerActivity, logger: Logger,
         limits: Limits, handOver: @escaping @Sendable (CInt, Handover) -> Void) throws(ServerError) {
        self.listening = listening
        self.table = table
        self.counters = counters
        self.activity = activity
        self.logger = logger
        self.limits = limits
        self.handOver = handOver
        epoll = epoll_create1(CInt(EPOLL_CLOEXEC))
        wake = eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK))
        spare = eventfd(0, CInt(EFD_CLOEXEC))
        guard epoll >= 0, wake >= 0,
              clinux_epoll_ctl(epoll, EPOLL_CTL_ADD, listening, EPOLLIN.rawValue) == 0,
              clinux_epoll_ctl(epoll, EPOLL_CTL_ADD, wake, EPOLLIN.rawValue) == 0
        else {
            let reason = String(cString: strerror(errno))
            if epoll >= 0 { Glibc.close(epoll) }
            if wake >= 0 { Glibc.close(wake) }
            if spare >= 0 { Glibc.close(spare) }
            buffer.deallocate()
            throw ServerError(description: "cannot watch the socket for connections: \(reason)")
        }
    }

    deinit {
        Glibc.close(epoll)
        Glibc.close(wake)
        if spare >= 0 { Glibc.close(spare) }
        buffer.deallocate()
    }

    /// Starts the front door's thread.
    func start() throws(ServerError) {
        let me = Unmanaged.passRetained(self).toOpaque()
        var t = pthread_t()
        let r = pthread_create(&t, nil, { arg in
            guard let arg else { return nil }
            let door = Unmanaged<FrontDoor>.fromOpaque(arg).takeRetainedValue()
            clinux_name_thread("authbroker-door")
            door.run()
            return nil
        }, me)
        guard r == 0 else {
            Unmanaged<FrontDoor>.fromOpaque(me).release()
            throw ServerError(description: "cannot start the thread that accepts connections: \(String(cString: strerror(r)))")
        }
        thread = t
    }

    /// Stops accepting, closes the connections it holds (none has an answer being worked
    /// on: those are NIO's), and waits for the thread to end. The listening socket stays
    /// open: its owner closes it.
    func stop() {
        guard let t = thread else { return }
        thread = nil
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
        pthread_join(t, nil)
    }

    private func run() {
        var fds = [CInt](repeating: 0, count: 64)
        var events = [UInt32](repeating: 0, count: 64)
        while true {
            // Nothing to time out: sleep until something happens. Otherwise wake at least
            // once a second to close idle connections.
            let n = clinux_epoll_wait(epoll, &fds, &events, 64, connections.isEmpty ? -1 : 1000)
            if n < 0 {
                if errno == EINTR { continue }
                logger.critical("cannot wait for connections; no more are accepted", metadata: ["error": "\(String(cString: strerror(errno)))"])
                return
            }
            for i in 0..<Int(n) {
                let fd = fds[i]
                if fd == listening {
                    accept()
                } else if fd == wake {
                    for connection in connections.values { hangUp(connection) }
                    return
                } else if let connection = connections[fd] {
                    service(connection, events: events[i])
                }
            }
            if !connections.isEmpty { sweep() }
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
                case EMFILE where spare >= 0, ENFILE where spare >= 0:
                    refuseQueued()
                    continue
                default:
                    // Out of descriptors (EMFILE, ENFILE) or memory: the queue stays full and
                    // the socket readable; pause briefly instead of spinning, say so rarely.
                    let now = ServerActivity.monotonicNanoseconds()
                    if now &- lastAcceptError > 10_000_000_000 {
                        lastAcceptError = now
                        logger.error("cannot accept connections", metadata: ["error": "\(String(cString: strerror(errno)))"])
                    }
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
        // Over the limit, refused here and at once, rules or not: a flood of connections
        // costs a write and a close each, and holds no descriptor.
        guard activity.openConnections < limits.maxConnections else {
            let max = limits.maxConnections
            return refuse(fd, RPCError(.overloaded, "authbrokerd has \(max) connections open already; close some and try again", data: ErrorData(limit: max)),
                          log: "connection limit reached; refusing connections", ["limit": "\(max)"])
        }
        guard table.callerPolicy().isOpen else { return handOver(fd, Handover(descriptor: fd)) }
        activity.opened()
        let connection = Connection(fd: fd, now: ServerActivity.monotonicNanoseconds())
        connections[fd] = connection
        // The client has usually written its request by the time the daemon woke up.
        guard readRequest(connection) else { return }
        // An answer the socket did not take whole waits for the socket to drain: keep
        // watching for that too, or it would wait until the stall timeout cut it off.
        register(connection, events: connection.unsent.isEmpty ? Self.watched : Self.watched | EPOLLOUT.rawValue)
    }

    /// Out of descriptors with callers queued: gives up the spare descriptor for one
    /// `accept`, tells that caller why it is refused, and takes the spare back. Without it
    /// the queue would stay full and every caller in it would wait for nothing.
    private func refuseQueued() {
        Glibc.close(spare)
        let fd = clinux_accept(listening)
        if fd >= 0 {
            refuse(fd, RPCError(.overloaded, "authbrokerd is out of file descriptors; close some connections and try again, or raise its LimitNOFILE"),
                   log: "out of file descriptors; refusing connections", [:])
        } else {
            usleep(10_000)  // nothing to take after all: do not spin
        }
        spare = eventfd(0, CInt(EFD_CLOEXEC))
    }

    /// Answers a connection it will not serve with one error line and closes it at once.
    /// What the caller already sent is read first, so that the close does not reset the
    /// connection before the caller has read the answer.
    private func refuse(_ fd: CInt, _ error: RPCError, log message: Logger.Message, _ metadata: Logger.Metadata) {
        counters.errors.increment()
        overLimit.refused(message, metadata, logger: logger)
        var line = codec.failure(.null, error)
        line.append(UInt8(ascii: "\n"))
        _ = line.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        // A few reads at most: a caller that keeps writing must not hold the thread.
        for _ in 0..<4 {
            guard recv(fd, buffer.baseAddress, buffer.count, CInt(MSG_DONTWAIT)) == buffer.count else { break }
        }
        Glibc.close(fd)
    }

    /// Input, the peer's hang-up, and errors; edge-triggered (a read that returns less than
    /// the buffer drained the socket).
    static let watched = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue

    /// Adds the connection to the epoll set, or changes what it watches.
    func register(_ connection: Connection, events: UInt32) {
        let op = connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
        guard clinux_epoll_ctl(epoll, op, connection.fd, events) == 0 else {
            logger.error("cannot watch a connection; closing it", metadata: ["error": "\(String(cString: strerror(errno)))"])
            return hangUp(connection)
        }
        connection.registered = true
    }

    private func service(_ connection: Connection, events: UInt32) {
        if events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { connection.peerDone = true }
        if events & EPOLLOUT.rawValue != 0, !connection.unsent.isEmpty {
            guard flush(connection) else { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            guard connection.unsent.isEmpty else {
                connection.inputWaiting = true
                return
            }
            guard readRequest(connection) else { return }
        }
        finishIfDone(connection)
    }

    /// Closes a connection whose peer hung up once everything it sent is answered.
    func finishIfDone(_ connection: Connection) {
        guard connection.peerDone, connection.unsent.isEmpty, !connection.inputWaiting,
              connections[connection.fd] != nil
        else { return }
        hangUp(connection)
    }

    /// Closes the connections idle for `idleTimeout`, and those that took none of their
    /// answer's bytes for `stallTimeout` (the peer does not read: nothing more is read from it).
    private func sweep() {
        let now = ServerActivity.monotonicNanoseconds()
        guard now &- lastSweep >= 1_000_000_000 else { return }
        lastSweep = now
        for connection in Array(connections.values) {
            if !connection.unsent.isEmpty {
                if now &- connection.unsentSince > limits.stallTimeout {
                    logger.info("closing a connection that does not read its answers")
                    hangUp(connection)
                }
            } else if now &- connection.lastActive > limits.idleTimeout {
                hangUp(connection)
            }
        }
    }

    /// Closes a connection the front door holds.
    func hangUp(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        _ = Glibc.close(connection.fd)
        activity.closed()
    }

    /// Gives a connection the front door holds to NIO, with what it did on it. Every such
    /// connection was accepted without rules (under rules the front door keeps none).
    func give(_ connection: Connection, _ handover: Handover) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        var handover = handover
        handover.descriptor = connection.fd
        handover.acceptedWithoutRules = true
        if connection.registered { _ = clinux_epoll_ctl(epoll, EPOLL_CTL_DEL, connection.fd, 0) }
        // NIO counts it again when its pipeline becomes active.
        activity.closed()
        handOver(connection.fd, handover)
    }
}
