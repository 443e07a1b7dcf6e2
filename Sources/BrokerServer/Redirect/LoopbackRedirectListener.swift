#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import NIOCore
import NIOPosix
import Synchronization

/// Opens the browser sign-in's loopback listeners (RFC 8252 §7.3) on the server's event
/// loops: HTTP/1.1 on 127.0.0.1 only, each connection served on its own (one that stalls
/// holds nothing up), `SO_REUSEADDR` so a fixed `redirect_port` can be bound again while
/// the last sign-in's connections sit in TIME_WAIT.
public struct LoopbackRedirects: RedirectListening {
    /// Connections one listener serves at once. When a new one comes to a full listener,
    /// the oldest that has sent no request head yet is closed for it (any local process
    /// may connect, and idle connections must not cost the browser its redirect); when
    /// every one has sent its head, the new one is closed.
    static let maxConnections = 32
    /// A connection must send its request head within this time.
    static let headTimeout = TimeAmount.seconds(10)

    private let group: any EventLoopGroup

    public init(group: any EventLoopGroup) {
        self.group = group
    }

    public func listen(port: UInt16, screen: RedirectScreen) async throws(BrokerError) -> any RedirectListener {
        let waiting = RedirectWaiting(screen: screen)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard waiting.admit(channel) else { throw ChannelError.ioOnClosedChannel }
                    try channel.pipeline.syncOperations.addHandler(RedirectHTTPHandler(waiting: waiting))
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(host: "127.0.0.1", port: Int(port)).get()
        } catch {
            throw BrokerError.invalidRequest(message: Self.bindFailure(port: port, error))
        }
        guard let bound = channel.localAddress?.port, bound > 0 else {
            try? await channel.close()
            throw BrokerError.internalError("the sign-in's loopback listener has no port")
        }
        return LoopbackRedirectListener(port: UInt16(bound), server: channel, waiting: waiting)
    }

    private static func bindFailure(port: UInt16, _ error: any Error) -> String {
        let errno = (error as? IOError)?.errnoCode
        let reason = errno.map { String(cString: strerror($0)) } ?? "\(error)"
        if errno == EADDRINUSE, port != 0 {
            return "cannot listen on 127.0.0.1:\(port) for the sign-in's redirect (\(reason)): another program holds that port; stop it, or change redirect_port and the redirect URI registered with the provider"
        }
        return "cannot listen on 127.0.0.1:\(port) for the sign-in's redirect (\(reason))"
    }
}

/// One sign-in's listener: its server channel and the redirect it waits for.
final class LoopbackRedirectListener: RedirectListener {
    let port: UInt16
    private let server: any Channel
    private let waiting: RedirectWaiting

    init(port: UInt16, server: any Channel, waiting: RedirectWaiting) {
        self.port = port
        self.server = server
        self.waiting = waiting
    }

    func redirect() async -> BrowserRedirect? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { waiting.wait($0) }
        } onCancel: {
            waiting.stopWaiting()
        }
    }

    func close() async {
        for connection in waiting.shut() { connection.close(promise: nil) }
        try? await server.close()
    }
}

/// What the connections of one listener share: the screen, the waiting sign-in, the
/// redirect it accepted, and the open connections (closed with the listener).
final class RedirectWaiting: Sendable {
    let screen: RedirectScreen

    private struct State {
        var waiter: CheckedContinuation<BrowserRedirect?, Never>?
        var arrived: BrowserRedirect?
        var accepted = false
        var waitStopped = false
        var closed = false
        var connections: [ObjectIdentifier: any Channel] = [:]
        /// The connections that have sent no request head yet, oldest first.
        var headless: [ObjectIdentifier] = []
    }

    private let state = Mutex(State())

    init(screen: RedirectScreen) {
        self.screen = screen
    }

    /// Counts a new connection in, making room by closing the oldest connection without
    /// a request head when the listener is full; false when it is closed, or full of
    /// connections that all sent their heads.
    func admit(_ channel: any Channel) -> Bool {
        let (admitted, dropped) = state.withLock { s -> (Bool, (any Channel)?) in
            guard !s.closed else { return (false, nil) }
            var dropped: (any Channel)?
            if s.connections.count >= LoopbackRedirects.maxConnections {
                guard !s.headless.isEmpty else { return (false, nil) }
                dropped = s.connections.removeValue(forKey: s.headless.removeFirst())
            }
            let id = ObjectIdentifier(channel)
            s.connections[id] = channel
            s.headless.append(id)
            return (true, dropped)
        }
        dropped?.close(promise: nil)
        return admitted
    }

    /// The connection sent its request head: it is no longer the first to make room.
    func headArrived(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { s in s.headless.removeAll { $0 == id } }
    }

    /// The connection closed, or is answering and closes itself once the page is out.
    func release(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        state.withLock { s in
            s.connections.removeValue(forKey: id)
            s.headless.removeAll { $0 == id }
        }
    }

    enum Offer {
        case taken, late, closed
    }

    /// A redirect the screen accepted: handed to the waiting sign-in (or kept for it).
    func offer(_ redirect: BrowserRedirect) -> Offer {
        let (offer, waiter) = state.withLock { s -> (Offer, CheckedContinuation<BrowserRedirect?, Never>?) in
            if s.closed { return (.closed, nil) }
            if s.accepted { return (.late, nil) }
            s.accepted = true
            guard let waiter = s.waiter else {
                s.arrived = redirect
                return (.taken, nil)
            }
            s.waiter = nil
            return (.taken, waiter)
        }
        waiter?.resume(returning: redirect)
        return offer
    }

    func wait(_ continuation: CheckedContinuation<BrowserRedirect?, Never>) {
        let now: BrowserRedirect?? = state.withLock { s in
            if let arrived = s.arrived {
                s.arrived = nil
                return .some(arrived)
            }
            if s.closed || s.waitStopped { return .some(nil) }
            s.waiter = continuation
            return nil
        }
        if let now { continuation.resume(returning: now) }
    }

    /// The waiting task was cancelled: it gets nil.
    func stopWaiting() {
        let waiter = state.withLock { s in
            s.waitStopped = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Closes the listener's side: the waiter gets nil; returns the connections to close.
    func shut() -> [any Channel] {
        let (waiter, connections) = state.withLock { s in
            s.closed = true
            defer {
                s.waiter = nil
                s.connections = [:]
                s.headless = []
            }
            return (s.waiter, Array(s.connections.values))
        }
        waiter?.resume(returning: nil)
        return connections
    }
}
