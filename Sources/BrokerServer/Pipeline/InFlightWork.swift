import BrokerCore

/// One connection's answers still being worked on (`RPCHandler`), and what they may cost.
/// A value kept in the handler: nothing is allocated for it.
struct InFlightWork {
    /// Async answers not yet written; a half-closed connection closes when this reaches 0.
    var pending = 0
    /// The peer closed its writing side: the connection closes once its answers are out.
    var inputClosed = false
    /// Work cancelled when the connection closes (`Reply.untilClosed`), by a key per request.
    var cancelledOnClose: [Int: Task<Void, Never>] = [:]
    var nextKey = 0
    /// Requests to the providers this connection's work may still cause.
    let allowance: ConnectionAllowance
    /// Names this connection's requests to the refresh queue, which takes turns between
    /// connections (`RequestOrigin`).
    let origin = RequestOrigin.next()

    init(allowance: ConnectionAllowance) { self.allowance = allowance }

    /// A key for a new piece of work.
    mutating func newKey() -> Int {
        defer { nextKey += 1 }
        return nextKey
    }
}
