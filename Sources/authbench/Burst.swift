#if canImport(Glibc)
import Glibc
#endif

/// N requests at once, each on its own connection: the cold-cache test. Every connection
/// is opened first, then every request is sent, then the answers are awaited.
struct Burst {
    let socket: String
    let count: Int
    let line: [UInt8]
    let timeout: Double

    func run() throws(BenchError) -> String {
        var fds: [Int32] = []
        fds.reserveCapacity(count)
        defer { for fd in fds { close(fd) } }
        for _ in 0..<count { fds.append(try UnixClient.connect(socket)) }
        var readers = [LineReader](repeating: LineReader(), count: count)
        var done = [Bool](repeating: false, count: count)
        var errors = 0
        var firstErrorCode = 0
        var firstAnswer: UInt64 = 0
        let t0 = Clock.nanos()
        for fd in fds { try UnixClient.send(fd, line) }
        let sent = Clock.nanos()
        var left = count
        var pfds = [pollfd](repeating: pollfd(), count: count)
        let deadline = t0 + UInt64(timeout * 1e9)
        while left > 0 {
            var k = 0
            var index: [Int] = []
            index.reserveCapacity(left)
            for i in 0..<count where !done[i] {
                pfds[k] = pollfd(fd: fds[i], events: Int16(POLLIN), revents: 0)
                index.append(i)
                k += 1
            }
            let n = poll(&pfds, nfds_t(k), 1000)
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("poll: \(UnixClient.errorText())")
            }
            if Clock.nanos() > deadline { throw BenchError("\(left) of \(count) requests unanswered after \(timeout) s") }
            for j in 0..<k where pfds[j].revents != 0 {
                let i = index[j]
                guard let answer = try readers[i].readLine(fds[i]) else { continue }
                if firstAnswer == 0 { firstAnswer = Clock.nanos() }
                if Answer.isError(answer) {
                    if errors == 0 { firstErrorCode = Answer.errorCode(answer) }
                    errors += 1
                }
                done[i] = true
                left -= 1
            }
        }
        let all = Clock.nanos()
        var out = JSONLine()
        out.add("count", count)
        out.add("errors", errors)
        out.add("first_error_code", firstErrorCode)
        out.add("send_ms", Double(sent - t0) / 1e6)
        out.add("first_ms", Double(firstAnswer - t0) / 1e6)
        out.add("all_ms", Double(all - t0) / 1e6)
        return out.text
    }
}
