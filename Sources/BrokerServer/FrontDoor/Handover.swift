import BrokerProtocol
import NIOCore

/// What the front door did on a connection before it handed it to NIO's pipeline
/// (`FrontDoor`): NIO goes on from exactly there.
struct Handover: Sendable {
    /// The connection's socket, which NIO keeps to itself once it has it: the writer check
    /// peeks at it under `[[allow]]` rules (`WriterCheck`). nil only in tests on an
    /// `EmbeddedChannel`.
    var descriptor: CInt?
    /// Bytes read from the socket and not handled: the pipeline reads them before the socket.
    var unread: ByteBuffer?
    /// A request the front door took in whose answer comes later (a refresh, a sign-in):
    /// the RPC handler carries it out and writes its answer.
    var adopted: AdoptedRequest?
    /// The connection was accepted while no `[[allow]]` rule was in force, so nobody read
    /// who connected; should rules be in force by now, its requests are refused as those of
    /// any connection opened before them (`PeerIdentity.openedBeforeRulesError`).
    var acceptedWithoutRules = false
}

/// A request taken in by the front door, answered later by the RPC handler.
struct AdoptedRequest: Sendable {
    let reply: Reply
    let id: RequestID
    /// False for a notification (no id): carried out, never answered.
    let answer: Bool
    /// Whether its work runs with the connection's `ConnectionAllowance` (`MethodTable.mints`).
    var mints = false
}
