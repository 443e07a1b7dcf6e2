import Glibc
import Synchronization

/// What every blocking step of one request shares: the server's name for error sentences,
/// the request's deadlines and the cancellation signal.
struct Wire: Sendable {
    /// "host" or "host:port" of the origin server, for errors.
    let host: String
    let deadlines: RequestDeadlines
    let cancel: CancelSignal

    /// The deadline in force: the request's until its bytes are written, then its answer's.
    var deadline: Deadline { deadlines.current }

    /// Waits until `fd` is ready for `events` (POLLIN or POLLOUT). Throws `.cancelled`
    /// when the task is cancelled and `.timedOut` when the deadline (or `sooner`, one
    /// step's own, when given) passes first.
    func wait(_ fd: Int32, for events: Int16, sooner: Deadline? = nil) throws(HTTPClientError) {
        while true {
            if cancel.isFired { throw .cancelled(host: host) }
            let milliseconds = min(deadline.remainingMilliseconds, sooner?.remainingMilliseconds ?? Int32.max)
            if milliseconds == 0 { throw .timedOut(host: host) }
            var fds = [pollfd(fd: fd, events: events, revents: 0), pollfd(fd: cancel.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            let count = poll(&fds, 2, milliseconds)
            if count < 0 {
                if errno == EINTR { continue }
                throw .system(host: host, reason: "poll failed (errno \(errno))")
            }
            if fds[1].revents != 0 || cancel.isFired { throw .cancelled(host: host) }
            // Errors and hang-ups count as ready: the next read or write reports them.
            if fds[0].revents != 0 { return }
        }
    }

    /// Throws `.cancelled` or `.timedOut` when either has happened already.
    func check() throws(HTTPClientError) {
        if cancel.isFired { throw .cancelled(host: host) }
        if deadline.hasPassed { throw .timedOut(host: host) }
    }
}

/// A request's two deadlines: `send` bounds the connection, the TLS handshake and writing
/// the request; once it is written, `answer` bounds reading the answer. A provider that
/// never got the request cannot have acted on it, so only a written request is worth
/// waiting longer for (a refresh's late answer, docs/configuration.md `refresh_timeout`).
final class RequestDeadlines: Sendable {
    private let send: Deadline
    private let answer: Deadline
    private let written = Atomic<Bool>(false)

    /// `answerSeconds`, when given, counts from now as `sendSeconds` does; never shorter.
    init(sendSeconds: Double, answerSeconds: Double?) {
        send = Deadline(secondsFromNow: sendSeconds)
        answer = Deadline(secondsFromNow: max(sendSeconds, answerSeconds ?? sendSeconds))
    }

    /// The request's bytes are all written: the answer's deadline is in force from now.
    func requestWritten() { written.store(true, ordering: .releasing) }

    var current: Deadline { written.load(ordering: .acquiring) ? answer : send }
}
