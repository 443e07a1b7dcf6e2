#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import HTTPClient
import Synchronization

/// Receives the authorization redirect on 127.0.0.1 and an ephemeral port (RFC 8252 §7.3).
///
/// Only the loopback address is bound, so nothing off the machine can reach it; it serves
/// `/callback` once and holds the browser's connection until the sign-in's outcome is
/// known, so the page can say how it went.
final class LoopbackListener: Sendable {
    let port: UInt16
    private let fd: Int32
    private let closed = Atomic<Bool>(false)

    /// One redirect: its query parameters and the browser connection to answer.
    struct Redirect: Sendable {
        let query: [String: String]
        let connection: Int32

        /// Answers the browser with a short page and closes its connection.
        func answer(title: String, text: String, ok: Bool) {
            let body = """
                <!doctype html><html><head><meta charset="utf-8"><title>\(html(title))</title></head>
                <body style="font-family:sans-serif;margin:3em"><h1>\(html(title))</h1><p>\(html(text))</p>
                <p>You may close this window.</p></body></html>
                """
            let head = "HTTP/1.1 \(ok ? "200 OK" : "400 Bad Request")\r\nContent-Type: text/html; charset=utf-8\r\n"
                + "Content-Length: \(body.utf8.count)\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
            LoopbackListener.send(connection, head + body)
            Glibc.close(connection)
        }

        private func html(_ s: String) -> String {
            s.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
        }
    }

    init(port: UInt16 = 0) throws(BrokerError) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BrokerError.internalError("cannot open a loopback socket for the sign-in") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            Glibc.close(fd)
            throw BrokerError.invalidRequest(message: "cannot listen on 127.0.0.1:\(port) for the sign-in's redirect: \(String(cString: strerror(errno)))")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.port = UInt16(bigEndian: addr.sin_port)
    }

    deinit { close() }

    var redirectURI: String { "http://127.0.0.1:\(port)/callback" }

    /// Frees the port. Idempotent.
    func close() {
        if !closed.exchange(true, ordering: .sequentiallyConsistent) { Glibc.close(fd) }
    }

    /// Waits for the redirect to `/callback`, answering anything else with 404, until the
    /// deadline (Unix seconds) or `close()`. Nil when none came.
    func next(until deadline: Double, clock: WallClock) async -> Redirect? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: self.accept(until: deadline, clock: clock))
            }
        }
    }

    private func accept(until deadline: Double, clock: WallClock) -> Redirect? {
        while !closed.load(ordering: .sequentiallyConsistent) {
            let left = deadline - clock.now()
            if left <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(left, 0.25) * 1000) + 1)
            if ready <= 0 { continue }
            let conn = Glibc.accept(fd, nil, nil)
            if conn < 0 { continue }
            _ = fcntl(conn, F_SETFD, FD_CLOEXEC)
            guard let target = Self.readRequestTarget(conn) else {
                Self.send(conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                Glibc.close(conn)
                continue
            }
            let (path, query) = Self.split(target)
            guard path == "/callback" else {
                Self.send(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                Glibc.close(conn)
                continue
            }
            return Redirect(query: query, connection: conn)
        }
        return nil
    }

    /// Reads the request head (at most 16 KiB, 5 s) and returns the request target of a GET.
    private static func readRequestTarget(_ conn: Int32) -> String? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 16 * 1024 {
            let n = recv(conn, &buffer, buffer.count, 0)
            if n <= 0 { break }
            bytes += buffer[0..<n]
            if bytes.firstRange(of: [13, 10, 13, 10]) != nil { break }
        }
        guard let line = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", maxSplits: 1).first else { return nil }
        let parts = line.split(separator: " ")
        guard parts.count == 3, parts[0] == "GET", parts[2].hasPrefix("HTTP/1.") else { return nil }
        return String(parts[1])
    }

    static func split(_ target: String) -> (path: String, query: [String: String]) {
        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if pieces.count == 2 {
            for pair in pieces[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = PercentDecoding.decode(kv[0], plusIsSpace: true)
                // A parameter given twice is ambiguous; keeping neither makes the check fail.
                if query[name] != nil { query[name] = "" } else { query[name] = kv.count == 2 ? PercentDecoding.decode(kv[1], plusIsSpace: true) : "" }
            }
        }
        return (String(pieces[0]), query)
    }

    fileprivate static func send(_ conn: Int32, _ text: String) {
        var text = text
        text.withUTF8 { buf in
            guard let base = buf.baseAddress else { return }
            var off = 0
            while off < buf.count {
                let n = Glibc.send(conn, base + off, buf.count - off, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                off += n
            }
        }
    }
}
