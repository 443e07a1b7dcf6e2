#if canImport(Glibc)
import Glibc
#endif

/// A monotonic clock in nanoseconds: what every figure of the benchmark is measured with.
enum Clock {
    static func nanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// The failure of a benchmark step, as one sentence.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Plain blocking Unix-socket calls, as a shell script's client or oidc-agent's make them.
enum UnixClient {
    /// Connects to `path`; returns the fd or throws with the errno text.
    static func connect(_ path: String) throws(BenchError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw BenchError("the socket path \(path) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(errorText())") }
        while true {
            let r = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if r == 0 { return fd }
            if errno == EINTR { continue }
            let text = errorText()
            close(fd)
            throw BenchError("cannot connect to \(path): \(text)")
        }
    }

    /// Writes all of `bytes`.
    static func send(_ fd: Int32, _ bytes: [UInt8]) throws(BenchError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress.map { $0 + sent }, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("send: \(errorText())")
            }
            sent += n
        }
    }

    static func errorText() -> String {
        String(cString: strerror(errno))
    }
}

/// One connection's receive side: bytes read until a whole line is in.
struct LineReader {
    var buffer: [UInt8] = []

    /// Reads what is there (one `read`); returns the first complete line if one is in, and
    /// keeps the rest. Throws when the peer closed the connection first.
    mutating func readLine(_ fd: Int32) throws(BenchError) -> [UInt8]? {
        let n = try readSome(fd)
        if n == 0 { throw BenchError("the server closed the connection before answering") }
        guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        let line = Array(buffer[..<newline])
        buffer.removeSubrange(...newline)
        return line
    }

    /// Reads what is there (one `read`); returns everything read once the peer has closed
    /// the connection. Throws when it closed without sending anything.
    mutating func readToClose(_ fd: Int32) throws(BenchError) -> [UInt8]? {
        guard try readSome(fd) == 0 else { return nil }
        if buffer.isEmpty { throw BenchError("the server closed the connection before answering") }
        defer { buffer = [] }
        return buffer
    }

    /// One `read` into the buffer: the byte count, 0 at end of stream, -1 when nothing was
    /// there yet.
    private mutating func readSome(_ fd: Int32) throws(BenchError) -> Int {
        let n = withUnsafeTemporaryAllocation(byteCount: 65536, alignment: 1) { chunk -> Int in
            let n = read(fd, chunk.baseAddress, chunk.count)
            if n > 0 { buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[..<n])) }
            return n
        }
        if n < 0 {
            if errno == EINTR || errno == EAGAIN { return -1 }
            throw BenchError("read: \(UnixClient.errorText())")
        }
        return n
    }

    /// Blocks until one whole line is in.
    mutating func readLineBlocking(_ fd: Int32) throws(BenchError) -> [UInt8] {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            if let line = try readLine(fd) { return line }
        }
    }
}

/// Whether an answer line is a JSON-RPC success (or, for the echo floor, the line itself).
enum Answer {
    static let errorMarker = Array(#""error":"#.utf8)
    static let codeMarker = Array(#""code":"#.utf8)

    static func isError(_ line: [UInt8]) -> Bool { end(of: errorMarker, in: line, from: 0) != nil }

    /// The error's code (such as -32003), or 0 when the line holds none.
    static func errorCode(_ line: [UInt8]) -> Int {
        guard let e = end(of: errorMarker, in: line, from: 0), var i = end(of: codeMarker, in: line, from: e) else { return 0 }
        var sign = 1
        if i < line.count && line[i] == UInt8(ascii: "-") { sign = -1; i += 1 }
        var value = 0
        while i < line.count, line[i] >= UInt8(ascii: "0"), line[i] <= UInt8(ascii: "9") {
            value = value * 10 + Int(line[i] - UInt8(ascii: "0"))
            i += 1
        }
        return sign * value
    }

    /// The index just past the first `marker` in `line` at or after `start`.
    private static func end(of marker: [UInt8], in line: [UInt8], from start: Int) -> Int? {
        guard line.count >= marker.count else { return nil }
        var i = start
        while i <= line.count - marker.count {
            var j = 0
            while j < marker.count && line[i + j] == marker[j] { j += 1 }
            if j == marker.count { return i + marker.count }
            i += 1
        }
        return nil
    }
}
