import Glibc
import Synchronization

/// getaddrinfo(3) for a host name, on a thread of its own and waited for under the
/// request's deadline: a name server that never answers (a VPN gone, a captive network)
/// costs the request its time-out, not the resolver's own time-outs (up to minutes), and
/// cancelling the task stops the wait at once. A lookup left behind frees its answer
/// when it ends.
final class HostLookup: Sendable {
    /// getaddrinfo's status and list, owned by whoever takes it.
    private struct Answer: @unchecked Sendable {
        var status: Int32
        var list: UnsafeMutablePointer<addrinfo>?
    }

    private struct State {
        var answer: Answer?
        var abandoned = false
    }

    private let state = Mutex(State())

    private init() {}

    /// getaddrinfo(3) for a stream socket to `host`:`port`, either address family, on the
    /// calling thread: for an IP address (`AI_NUMERICHOST` in `flags`), which is read at
    /// once, and on the lookup's own thread for a host name (`resolve`).
    static func addresses(_ host: String, port: Int, flags: Int32 = 0) -> (status: Int32, list: UnsafeMutablePointer<addrinfo>?) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | flags
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        return (status, list)
    }

    /// `addresses` for a host name: getaddrinfo's status and address list (the caller
    /// frees it with freeaddrinfo). Throws `.timedOut` or `.cancelled` when the request's
    /// deadline or cancellation comes first.
    static func resolve(_ host: String, port: Int, wire: Wire) throws(HTTPClientError) -> (status: Int32, list: UnsafeMutablePointer<addrinfo>?) {
        guard let done = CancelSignal() else {
            throw .system(host: wire.host, reason: "the process is out of file descriptors")
        }
        // Closed when the wait ends; the lookup's later `fire` then only sets a flag.
        defer { done.close() }
        let lookup = HostLookup()
        let started = WorkerThread.start {
            let (status, list) = addresses(host, port: port)
            let kept = lookup.state.withLock { state -> Bool in
                guard !state.abandoned else { return false }
                state.answer = Answer(status: status, list: list)
                return true
            }
            if !kept, let list { freeaddrinfo(list) }
            done.fire()
        }
        guard started else { throw .system(host: wire.host, reason: "no thread could be started to look the host name up") }
        do throws(HTTPClientError) {
            while lookup.state.withLock({ $0.answer == nil }) {
                try wire.wait(done.fileDescriptor, for: Int16(POLLIN))
            }
        } catch {
            let late = lookup.state.withLock { state -> Answer? in
                state.abandoned = true
                defer { state.answer = nil }
                return state.answer
            }
            if let list = late?.list { freeaddrinfo(list) }
            throw error
        }
        let answer = lookup.state.withLock { state -> Answer? in
            defer { state.answer = nil }
            return state.answer
        }
        return (answer?.status ?? EAI_SYSTEM, answer?.list)
    }
}
