#if canImport(Glibc)
import Glibc
#endif

/// A closed-loop load: `connections` clients, each sending one request and waiting for its
/// answer before the next, for a fixed time. One thread drives every connection with
/// poll(2), so the load generator takes at most one of the machine's cores.
struct Load {
    enum Mode: String {
        /// One connection per client, many requests on it.
        case persistent
        /// A new connection per request: connect, send, read the answer, close.
        case connect
    }

    /// Where an answer ends.
    enum Framing: String {
        /// At its `\n`, as authbrokerd answers.
        case line
        /// When the server closes the connection, as oidc-agent answers (one JSON object,
        /// no newline, then close): the request goes out without a `\n` too.
        case close
    }

    let socket: String
    let mode: Mode
    let connections: Int
    let seconds: Double
    let warmup: Double
    /// The request, `\n`-terminated with `.line` framing.
    let line: [UInt8]
    var framing: Framing = .line
    /// Other requests, sent in turn after `line` on each connection (each `\n`-terminated):
    /// callers asking in turn for other tokens.
    var others: [[UInt8]] = []

    private struct Slot {
        var fd: Int32 = -1
        var reader = LineReader()
        var started: UInt64 = 0
        var sent = 0
    }

    func run() throws(BenchError) -> String {
        guard framing == .line || mode == .connect else {
            throw BenchError("an answer that ends when the server closes needs --mode connect")
        }
        var slots = [Slot](repeating: Slot(), count: connections)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(1 << 20)
        var errors = 0
        var completed = 0
        let begin = Clock.nanos()
        let measureFrom = begin + UInt64(warmup * 1e9)
        let end = measureFrom + UInt64(seconds * 1e9)

        func start(_ i: Int) throws(BenchError) {
            if mode == .connect || slots[i].fd < 0 {
                if slots[i].fd >= 0 { close(slots[i].fd) }
                slots[i].started = Clock.nanos()
                slots[i].fd = try UnixClient.connect(socket)
                slots[i].reader = LineReader()
            } else {
                slots[i].started = Clock.nanos()
            }
            let turn = slots[i].sent % (others.count + 1)
            let request = turn == 0 ? line : others[turn - 1]
            slots[i].sent += 1
            try UnixClient.send(slots[i].fd, request)
        }

        for i in 0..<connections { try start(i) }
        var pfds = [pollfd](repeating: pollfd(), count: connections)
        var active = connections
        while active > 0 {
            for i in 0..<connections {
                pfds[i] = pollfd(fd: slots[i].fd, events: Int16(POLLIN), revents: 0)
            }
            let n = poll(&pfds, nfds_t(connections), 5000)
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("poll: \(UnixClient.errorText())")
            }
            if n == 0 { throw BenchError("no answer within 5 s on \(socket)") }
            for i in 0..<connections where pfds[i].revents != 0 && slots[i].fd >= 0 {
                let fd = slots[i].fd
                let answer = framing == .line ? try slots[i].reader.readLine(fd) : try slots[i].reader.readToClose(fd)
                guard let answer else { continue }
                let now = Clock.nanos()
                if Answer.isError(answer) { errors += 1 }
                if now >= measureFrom && slots[i].started >= measureFrom && now <= end {
                    latencies.append(now - slots[i].started)
                    completed += 1
                }
                if now < end {
                    try start(i)
                } else {
                    close(slots[i].fd)
                    slots[i].fd = -1
                    active -= 1
                }
            }
        }
        let summary = LatencySummary(nanos: latencies)
        var out = JSONLine()
        out.add("mode", mode.rawValue)
        out.add("connections", connections)
        out.add("seconds", seconds)
        out.add("requests", completed)
        out.add("errors", errors)
        out.add("rps", Double(completed) / seconds)
        out.add("p50_us", summary.p50)
        out.add("p90_us", summary.p90)
        out.add("p99_us", summary.p99)
        out.add("mean_us", summary.mean)
        return out.text
    }
}
