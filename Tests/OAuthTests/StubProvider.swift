import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A canned answer of `StubProvider`.
struct StubAnswer: Sendable {
    var status: Int
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    /// Never answer; keep the connection open until the stub stops.
    var hang = false

    static func json(_ text: String, status: Int = 200) -> StubAnswer {
        StubAnswer(status: status, headers: ["Content-Type": "application/json"], body: Array(text.utf8))
    }

    static func empty(status: Int) -> StubAnswer { StubAnswer(status: status) }

    static func text(_ text: String, status: Int = 200) -> StubAnswer {
        StubAnswer(status: status, headers: ["Content-Type": "text/html"], body: Array(text.utf8))
    }

    static let hanging = StubAnswer(status: 0, hang: true)
}

/// One request that reached `StubProvider`.
struct RecordedRequest: Sendable {
    var method: String
    var path: String
    /// Names lowercased.
    var headers: [String: String]
    var body: [UInt8]

    /// The body as form pairs, decoded, in order.
    var form: [(String, String)] {
        String(decoding: body, as: UTF8.self).split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }
    }

    func values(_ name: String) -> [String] { form.filter { $0.0 == name }.map(\.1) }
    func value(_ name: String) -> String? { values(name).first }
}

/// A STUB OAuth provider for tests only: a tiny HTTP/1.1 server on 127.0.0.1 with an
/// ephemeral port that answers each path with canned answers, in order (the last one
/// repeats), and records every request. One connection at a time, `Connection: close`.
final class StubProvider: Sendable {
    private struct State {
        var routes: [String: [StubAnswer]] = [:]
        var requests: [RecordedRequest] = []
        var held: [Int32] = []
        var stopping = false
    }

    let port: UInt16
    private let listener: Int32
    private let state = Mutex(State())
    private let stopped = DispatchSemaphore(value: 0)

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var requests: [RecordedRequest] { state.withLock { $0.requests } }

    init() throws {
        let (fd, port) = try Self.listen()
        listener = fd
        self.port = port
        let thread = Thread { [self] in
            serve()
            stopped.signal()
        }
        thread.start()
    }

    /// Answers `path` with `answers`, one per request; the last one repeats.
    func route(_ path: String, _ answers: StubAnswer...) {
        state.withLock { $0.routes[path] = answers }
    }

    func stop() {
        state.withLock { $0.stopping = true }
        stopped.wait()
        for fd in state.withLock({ $0.held }) { close(fd) }
        close(listener)
    }

    /// A port on 127.0.0.1 where nothing listens (bound, then closed).
    static func closedPort() throws -> UInt16 {
        let (fd, port) = try listen()
        close(fd)
        return port
    }

    private static func listen() throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { close(fd); throw POSIXError(.EADDRINUSE) }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    private func serve() {
        while !state.withLock({ $0.stopping }) {
            var pollfd = Glibc.pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&pollfd, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            handle(client)
        }
    }

    private func handle(_ client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let request = read(client) else { close(client); return }
        let answer = state.withLock { state -> StubAnswer in
            state.requests.append(request)
            guard var answers = state.routes[request.path], let first = answers.first else { return .empty(status: 404) }
            if answers.count > 1 { answers.removeFirst(); state.routes[request.path] = answers }
            return first
        }
        if answer.hang {
            state.withLock { $0.held.append(client) }
            return
        }
        var head = "HTTP/1.1 \(answer.status) Stub\r\nContent-Length: \(answer.body.count)\r\nConnection: close\r\n"
        for (name, value) in answer.headers { head += "\(name): \(value)\r\n" }
        write(client, Array((head + "\r\n").utf8) + answer.body)
        close(client)
    }

    private func read(_ client: Int32) -> RecordedRequest? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let separator = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        var request: RecordedRequest?
        var contentLength = 0
        while true {
            if headerEnd == nil, let end = buffer.firstRange(of: separator)?.upperBound {
                headerEnd = end
                let lines = String(decoding: buffer[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                let start = lines[0].split(separator: " ")
                guard start.count >= 2 else { return nil }
                var headers: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                contentLength = Int(headers["content-length"] ?? "0") ?? 0
                if headers["expect"]?.lowercased() == "100-continue" { write(client, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) }
                request = RecordedRequest(method: String(start[0]), path: String(start[1]), headers: headers, body: [])
            }
            if let end = headerEnd, var found = request, buffer.count - end >= contentLength {
                found.body = Array(buffer[end..<(end + contentLength)])
                return found
            }
            let got = recv(client, &chunk, chunk.count, 0)
            guard got > 0 else { return nil }
            buffer += chunk[0..<got]
        }
    }

    private func write(_ client: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }
}
