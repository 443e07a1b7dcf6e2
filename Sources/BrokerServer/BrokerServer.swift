#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The Unix-socket JSON-RPC server: binds the socket, frames lines, and hands each request
/// to the method table.
public final class BrokerServer: Sendable {
    /// The longest request line accepted (docs/protocol.md).
    public static let maxLineLength = 64 * 1024

    private let broker: Broker
    private let logger: Logger
    private let group: any EventLoopGroup
    private let path: String
    /// A listening socket handed over by systemd (socket activation), or nil to bind `path`.
    private let inherited: CInt?
    /// The socket file this daemon made: the only one it removes when it stops (a daemon
    /// started meanwhile on the same path has its own).
    private let made = Mutex<SocketListener.Identity?>(nil)
    /// The listening socket, -1 before `start` and after `stopAccepting`.
    private let listening = Mutex<CInt>(-1)
    /// The thread that accepts connections, while it runs.
    private let door = Mutex<FrontDoor?>(nil)
    /// Open connections and requests in flight, for the daemon's idle exit.
    public let activity = ServerActivity()
    /// Reads what callers run, for the `[[allow]]` rules.
    private let inspector: ProcessInspector

    /// - Parameters:
    ///   - eventLoops: the loops to serve on (from `makeEventLoops`, shared with the sign-in's
    ///     `LoopbackRedirects`); the server shuts them down when it stops.
    ///   - inheritedSocket: a listening Unix socket the daemon inherited (fd 3 under
    ///     socket activation); `socketPath` is then only reported, never bound or removed.
    ///   - inspector: how callers' executables are read: through the identification helper
    ///     when the daemon is confined (`ProcessInspector.start()`), directly otherwise.
    public init(broker: Broker, socketPath: String, logger: Logger, eventLoops: (any EventLoopGroup)? = nil, inheritedSocket: CInt? = nil,
                inspector: ProcessInspector = .direct) {
        self.broker = broker
        self.inspector = inspector
        self.logger = logger
        self.path = socketPath
        self.inherited = inheritedSocket
        self.group = eventLoops ?? Self.makeEventLoops()
    }

    /// The daemon's event loops: one thread serves the socket and the sign-in listeners.
    public static func makeEventLoops(threads: Int = 1) -> any EventLoopGroup {
        MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Binds the socket (or takes the inherited one) and starts serving; returns once the
    /// daemon accepts connections. The front door accepts them (`FrontDoor`) and hands
    /// NIO those it does not answer itself.
    public func start() async throws {
        let fd: CInt
        do {
            if let inherited {
                try SocketListener.adopt(inherited)
                fd = inherited
            } else {
                try SocketListener.prepare(path: path)
                fd = try SocketListener.listen(path: path)
                made.withLock { $0 = SocketListener.identity(of: path) }
            }
        } catch {
            throw ServerError(description: error.description)
        }
        listening.withLock { $0 = fd }
        // Under [[allow]] rules the kernel names the writer of each message on every
        // connection from its first byte (WriterCheck); not otherwise: it costs nothing then.
        recordWriters(!broker.gate.policy.isOpen)
        let table = MethodTable.broker(broker, inspector: inspector)
        let limits = ConnectionLimits(broker.config.daemon)
        // The user's namespaces, taken now while the daemon's parent is the one that started it.
        _ = PeerCredentials.userNamespaces
        let (group, logger) = (self.group, self.logger)
        let server = ServerContext(counters: broker.counters, activity: activity, logger: logger, events: broker.events.hub,
                                   inspector: inspector)
        let pipeline: ConnectionPipeline = { operations, handover in
            try Self.addHandlers(to: operations, table: table, limits: limits, server: server, handover: handover)
        }
        let door = try FrontDoor(
            listening: fd, table: table, limits: limits, server: server,
            handOver: { fd, handover in Self.handOver(fd, handover, to: group, pipeline, logger: logger) })
        try door.start()
        self.door.withLock { $0 = door }
        logger.info(inherited == nil ? "listening" : "listening on the socket systemd passed", metadata: ["socket": "\(path)"])
    }

    /// Builds one connection's pipeline (`addHandlers` with the daemon's settings), going on
    /// from what the front door did.
    typealias ConnectionPipeline = @Sendable (ChannelPipeline.SynchronousOperations, Handover) throws -> Void

    /// Gives a connection the front door accepted to NIO: the same pipeline, which goes on
    /// from where the front door stopped (`Handover`).
    private static func handOver(_ fd: CInt, _ handover: Handover, to group: any EventLoopGroup,
                                 _ pipeline: @escaping ConnectionPipeline, logger: Logger) {
        ClientBootstrap(group: group)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try setOptions(of: channel)
                    try pipeline(channel.pipeline.syncOperations, handover)
                }
            }
            .withConnectedSocket(fd)
            .whenFailure { error in logger.debug("cannot serve a connection", metadata: ["error": "\(error)"]) }
    }

    /// A connection's options, set directly on the event loop. As `childChannelOption`s of
    /// the bootstrap they would be applied through a chain of futures for every accepted
    /// connection: a tenth of the instructions of a new connection (docs/performance.md).
    static func setOptions(of channel: any Channel) throws {
        guard let options = channel.syncOptions else { return }
        // Half-closure (a client may close its writing side and still read its answers) is
        // switched on by the connection guard only while something is owed to the client.
        // Above 64 KiB of unsent answers a connection is not writable, and the RPC
        // handler stops reading its requests until it drains below 32 KiB.
        try options.setOption(.writeBufferWaterMark, value: .init(low: 32 * 1024, high: 64 * 1024))
    }

    /// One connection's pipeline: limits, line framing, the JSON-RPC handler. The handler
    /// tests build the same pipeline on an `EmbeddedChannel`, with their own `identify`.
    static func addHandlers(
        to pipeline: ChannelPipeline.SynchronousOperations, table: MethodTable, limits: ConnectionLimits, server: ServerContext,
        handover: Handover = Handover(), identify: @escaping PeerIdentifier = PeerCredentials.credentials(of:)
    ) throws {
        // One codec for the connection: the guard's answers and the handler's alike.
        let codec = RPCCodec()
        try pipeline.addHandler(ConnectionGuard(limits: limits, codec: codec))
        try pipeline.addHandler(LineFrameDecoder(maxLength: maxLineLength))
        try pipeline.addHandler(RPCHandler(table: table, limits: limits, server: server, handover: handover, identify: identify, codec: codec))
    }

    /// Switches the kernel's record of each message's writer (`SO_PASSCRED`) on or off for
    /// the connections made from now on; on while `[[allow]]` rules are in force (a reload
    /// switches it on before the rules take effect, and off after they are gone).
    public func recordWriters(_ on: Bool) {
        let fd = listening.withLock { $0 }
        guard fd >= 0 else { return }
        var value: CInt = on ? 1 : 0
        if setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &value, socklen_t(MemoryLayout<CInt>.size)) != 0 {
            logger.error("cannot switch the record of who writes on new connections; under [[allow]] rules they may be refused", metadata: ["error": "\(String(cString: strerror(errno)))"])
        }
    }

    /// Stops accepting: the front door ends (closing the connections between requests it
    /// holds, once the answers it works on are written, `FrontDoor.stopGrace`) and the
    /// listening socket is closed. Connections NIO serves go on.
    public func stopAccepting() {
        door.withLock { door in
            door?.stop()
            door = nil
        }
        listening.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// Stops accepting, removes the socket file if it is still the one this daemon made
    /// (never systemd's, never a newer daemon's), and stops the event loops.
    public func stop() async {
        stopAccepting()
        // Sign-ins hold listeners on these loops: end them (and answer their waiters)
        // while the loops still run.
        await broker.stop()
        for _ in 0..<20 where activity.requestsInFlight > 0 {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if inherited == nil, let made = made.withLock({ $0 }) { SocketListener.remove(path: path, ifStill: made) }
        try? await group.shutdownGracefully()
    }
}

/// The server could not start; `description` says why and what to do.
public struct ServerError: Error, CustomStringConvertible {
    public let description: String
}
