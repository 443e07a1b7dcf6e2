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

    /// getaddrinfo's status and address list (the caller frees it with freeaddrinfo).
    /// Throws `.timedOut` or `.cancelled` when the request's deadline or cancellation
    /// comes first.
    static func resolve(_ host: String, port: Int, family: Int32, socketType: Int32, flags: Int32,
                        wire: Wire) throws(HTTPClientError) -> (status: Int32, list: UnsafeMutablePointer<addrinfo>?) {
        guard let done = CancelSignal() else {
            throw .system(host: wire.host, reason: "the process is out of file descriptors")
        }
        // Closed when the wait ends; the lookup's later `fire` then only sets a flag.
        defer { done.close() }
        let lookup = HostLookup()
        let service = String(port)
        let started = WorkerThread.start {
            var hints = addrinfo()
            hints.ai_family = family
            hints.ai_socktype = socketType
            hints.ai_flags = flags
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, service, &hints, &list)
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
