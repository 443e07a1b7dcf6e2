import Glibc
import Synchronization

/// A pipe the request's thread polls beside its socket, so that cancelling the Swift task
/// wakes a blocked `poll` at once. `fire` may come from any thread at any time; the pipe
/// is closed only by `close`, after the request's thread is done with it.
final class CancelSignal: Sendable {
    private struct State {
        var readEnd: Int32
        var writeEnd: Int32
        var fired = false
    }

    private let state: Mutex<State>
    /// The end to poll for `POLLIN`; valid until `close`.
    let fileDescriptor: Int32

    /// Makes the pipe; nil when the process is out of file descriptors.
    init?() {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        fileDescriptor = ends[0]
        state = Mutex(State(readEnd: ends[0], writeEnd: ends[1]))
    }

    /// Marks the request cancelled and wakes its poll.
    func fire() {
        state.withLock { state in
            guard !state.fired else { return }
            state.fired = true
            if state.writeEnd >= 0 {
                var byte: UInt8 = 1
                _ = write(state.writeEnd, &byte, 1)
            }
        }
    }

    /// True once `fire` was called.
    var isFired: Bool { state.withLock { $0.fired } }

    /// Closes both ends; later `fire`s only set the flag.
    func close() {
        state.withLock { state in
            if state.readEnd >= 0 { _ = Glibc.close(state.readEnd) }
            if state.writeEnd >= 0 { _ = Glibc.close(state.writeEnd) }
            state.readEnd = -1
            state.writeEnd = -1
        }
    }
}
