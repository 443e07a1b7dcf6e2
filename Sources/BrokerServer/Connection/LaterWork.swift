import BrokerCore
import BrokerProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How an answer that comes later (a refresh, a sign-in) is worked on, wherever its
/// connection is held: NIO's `RPCHandler` and the front door (`FrontDoor.startWork`) both
/// start its task with these, and count it in the server's requests in flight.
enum LaterWork {
    /// The answer to a request past `[daemon] max_requests_in_flight`: every connection's
    /// work together is capped.
    static func overloaded(limit: Int) -> RPCError {
        RPCError(.overloaded, "authbrokerd is working on \(limit) requests already; try again shortly", data: ErrorData(limit: limit))
    }

    /// Runs `work` as a request of its connection: who asks (process `pid`, looked up only
    /// should the work show the user something, a notification), the connection's origin
    /// for the refresh queue's turns, and for token work its `cache_misses_per_minute`
    /// allowance (`ConnectionAllowance`).
    /// `executable` is the file the connection's identity was read as (under rules; nil
    /// otherwise): with the pid, what the work counts against (`ProgramShare`).
    static func run(_ work: @Sendable () async -> Data, asker pid: Int32?, executable: FileID? = nil, inspector: ProcessInspector,
                    origin: UInt64, allowance: ConnectionAllowance?) async -> Data {
        let lookup = pid.map { pid in
            Requester.Lookup(share: ProgramShare(pid: pid, executable: executable, forwarded: executable.map(Forwarders.identify) ?? false)) {
                inspector.program(of: pid)
            }
        }
        return await Requester.$lookup.withValue(lookup) {
            await RequestOrigin.$current.withValue(origin) {
                await ProviderRequests.$allowance.withValue(allowance) { await work() }
            }
        }
    }
}
