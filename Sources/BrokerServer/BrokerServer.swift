#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import Logging
import NIOCore
import NIOPosix

/// The Unix-socket JSON-RPC server: binds the socket, frames lines, and hands each request
/// to the method table.
public final class BrokerServer: Sendable {
    /// The longest request line accepted (docs/protocol.md).
    public static let maxLineLength = 64 * 1024

    private let broker: Broker
    private let logger: Logger
    private let group: MultiThreadedEventLoopGroup
    private let path: String

    public init(broker: Broker, socketPath: String, logger: Logger, threads: Int = 1) {
        self.broker = broker
        self.logger = logger
        self.path = socketPath
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Binds the socket and starts serving; returns once the daemon accepts connections.
    public func start() async throws -> any Channel {
        do {
            try SocketListener.prepare(path: path)
        } catch {
            throw ServerError(description: error.description)
        }
        let table = MethodTable.broker(broker)
        let counters = broker.counters
        let logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(LineFrameDecoder(maxLength: Self.maxLineLength)))
                    try channel.pipeline.syncOperations.addHandler(RPCHandler(table: table, counters: counters, logger: logger))
                }
            }
        let old = umask(0o177)
        defer { umask(old) }
        let channel: any Channel
        do {
            channel = try await bootstrap.bind(unixDomainSocketPath: path).get()
        } catch {
            throw ServerError(description: "cannot listen on \(path): \(error)")
        }
        SocketListener.secure(path: path)
        logger.info("listening", metadata: ["socket": "\(path)"])
        return channel
    }

    /// Stops accepting, removes the socket file, and stops the event loops.
    public func stop(_ channel: any Channel) async {
        try? await channel.close()
        unlink(path)
        try? await group.shutdownGracefully()
    }
}

/// The server could not start; `description` says why and what to do.
public struct ServerError: Error, CustomStringConvertible {
    public let description: String
}
