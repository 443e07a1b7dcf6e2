import BrokerCore

/// Who is on the other end of one connection (`RPCHandler`) and whether it is served: how
/// the peer is read, what was read of it, and the user's answers to its `confirm` questions.
struct ConnectionCaller {
    /// Reads the kernel's word on who opened a new connection.
    let identify: PeerIdentifier
    /// Reads the caller's executable for the policy (`PeerIdentity`).
    let inspector: ProcessInspector
    /// The peer: its uid at accept, the rest when a policy needs it (PeerIdentity).
    var peer: PeerIdentity?
    /// Whether this connection counts toward max_connections (another user's does not).
    var counted = false
    /// Nothing more is served on this connection (another user, over a limit, a changed process).
    var refused = false
    /// What the front door did on this connection before NIO had it; emptied once taken over.
    var handover: Handover
    /// The user's answers to `confirm` rules' questions on this connection.
    let answers = ConfirmAnswers()
}
