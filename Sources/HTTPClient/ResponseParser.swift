/// Reads one HTTP/1.1 response from a stream: the status line, the header fields, and the
/// body framed by chunked transfer-coding, `Content-Length`, or the end of the connection
/// (RFC 9112 §6.3). Interim 1xx responses are skipped; the body may not exceed `limit`.
struct ResponseParser {
    /// The most header bytes accepted for one response head.
    static let maximumHeadSize = 64 * 1024

    private let stream: any ByteStream
    private let host: String
    private let limit: Int
    private var buffer: [UInt8] = []
    private var position = 0
    private var closed = false

    init(stream: any ByteStream, host: String, limit: Int) {
        self.stream = stream
        self.host = host
        self.limit = limit
    }

    /// The status and header fields of one response head (names lowercased, repeated
    /// fields joined with ", ").
    struct Head {
        var status: Int
        var headers: [String: String]
    }

    /// Reads the final response (after any 1xx) with its body. `method` decides whether a
    /// body can follow (not after HEAD).
    mutating func readResponse(method: String) throws(HTTPClientError) -> HTTPClient.Response {
        var head = try readHead()
        while (100...199).contains(head.status), head.status != 101 { head = try readHead() }
        let body = try readBody(head: head, method: method)
        return HTTPClient.Response(status: head.status, headers: head.headers, body: body)
    }

    /// True when bytes after the head were already read (a proxy must send none after
    /// answering CONNECT).
    var hasBufferedBytes: Bool { position < buffer.count }

    /// Reads a status line and header fields up to the empty line.
    mutating func readHead() throws(HTTPClientError) -> Head {
        var used = 0
        guard let statusLine = try readLine(budget: &used, atStart: true) else { throw .connectionLost(host: host) }
        let status = try parseStatusLine(statusLine)
        var headers: [String: String] = [:]
        var lastName: String?
        while true {
            guard let line = try readLine(budget: &used, atStart: false) else { throw .connectionLost(host: host) }
            if line.isEmpty { break }
            if line[line.startIndex] == 0x20 || line[line.startIndex] == 0x09 {
                // Obsolete line folding (RFC 9112 §5.2): continue the previous field.
                guard let name = lastName else { throw .notHTTP(host: host) }
                headers[name, default: ""] += " " + Self.trimmed(line)
                continue
            }
            guard let colon = line.firstIndex(of: 0x3A), colon > line.startIndex,
                  line[..<colon].allSatisfy(HTTPToken.isByte)
            else { throw .notHTTP(host: host) }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = Self.trimmed(line[(colon + 1)...])
            if let existing = headers[name] {
                headers[name] = existing + ", " + value
            } else {
                headers[name] = value
            }
            lastName = name
        }
        return Head(status: status, headers: headers)
    }

    private func parseStatusLine(_ line: ArraySlice<UInt8>) throws(HTTPClientError) -> Int {
        // "HTTP/1.x SP 3DIGIT [SP reason]"
        let bytes = Array(line)
        guard bytes.count >= 12, bytes[0..<7].elementsEqual("HTTP/1.".utf8), (0x30...0x39).contains(bytes[7]),
              bytes[8] == 0x20, bytes[9...11].allSatisfy({ (0x30...0x39).contains($0) }),
              bytes.count == 12 || bytes[12] == 0x20
        else { throw .notHTTP(host: host) }
        let status = bytes[9...11].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard (100...999).contains(status) else { throw .notHTTP(host: host) }
        return status
    }

    private mutating func readBody(head: Head, method: String) throws(HTTPClientError) -> [UInt8] {
        if method == "HEAD" || head.status == 204 || head.status == 304 || head.status == 101 { return [] }
        if let coding = head.headers["transfer-encoding"] {
            let codings = coding.split(separator: ",").map { $0.trimmingSpacesAndLowercased }
            guard codings.last == "chunked" else {
                // A coding other than chunked last: the body runs to the end (RFC 9112 §6.3 ¶4);
                // authbroker asked for identity, so such an answer is not usable anyway.
                return try readToEnd()
            }
            return try readChunked()
        }
        if let field = head.headers["content-length"] {
            let values = Set(field.split(separator: ",").map { $0.trimmingSpacesAndLowercased })
            guard values.count == 1, let text = values.first, !text.isEmpty, text.count <= 18,
                  text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let length = Int(text)
            else { throw .notHTTP(host: host) }
            guard length <= limit else { throw .bodyTooLarge(host: host, limit: limit) }
            return try readExactly(length)
        }
        return try readToEnd()
    }

    private mutating func readChunked() throws(HTTPClientError) -> [UInt8] {
        var body: [UInt8] = []
        var used = 0
        while true {
            var lineBudget = 0
            guard let line = try readLine(budget: &lineBudget, atStart: false) else { throw .connectionLost(host: host) }
            var sizeText = line
            if let semicolon = line.firstIndex(of: 0x3B) { sizeText = line[..<semicolon] }
            let digits = String(decoding: sizeText, as: UTF8.self).trimmingSpacesAndLowercased
            // Hex digits only (RFC 9112 §7.1): Int(_:radix:) alone would take "-1" and "+5e".
            guard !digits.isEmpty, digits.count <= 15, digits.utf8.allSatisfy(Self.isHexDigit),
                  let size = Int(digits, radix: 16)
            else { throw .notHTTP(host: host) }
            if size == 0 { break }
            guard body.count + size <= limit else { throw .bodyTooLarge(host: host, limit: limit) }
            body += try readExactly(size)
            guard let end = try readLine(budget: &lineBudget, atStart: false), end.isEmpty else { throw .notHTTP(host: host) }
        }
        // Trailer fields, then the empty line: read and dropped.
        while true {
            guard let line = try readLine(budget: &used, atStart: false) else { throw .connectionLost(host: host) }
            if line.isEmpty { return body }
        }
    }

    private mutating func readExactly(_ count: Int) throws(HTTPClientError) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(min(count, 64 * 1024))
        while result.count < count {
            if position == buffer.count {
                guard try fill() else { throw .connectionLost(host: host) }
            }
            let take = min(count - result.count, buffer.count - position)
            result += buffer[position..<(position + take)]
            position += take
        }
        return result
    }

    private mutating func readToEnd() throws(HTTPClientError) -> [UInt8] {
        var result = Array(buffer[position...])
        position = buffer.count
        guard result.count <= limit else { throw .bodyTooLarge(host: host, limit: limit) }
        while try fill() {
            result += buffer[position...]
            position = buffer.count
            guard result.count <= limit else { throw .bodyTooLarge(host: host, limit: limit) }
        }
        return result
    }

    /// One line without its CRLF (a bare LF is accepted), or nil at a clean end of stream
    /// before any byte of the line. `budget` counts head bytes against `maximumHeadSize`.
    private mutating func readLine(budget: inout Int, atStart: Bool) throws(HTTPClientError) -> ArraySlice<UInt8>? {
        var scanned = 0
        while true {
            if let newline = buffer[(position + scanned)...].firstIndex(of: 0x0A) {
                var end = newline
                if end > position, buffer[end - 1] == 0x0D { end -= 1 }
                let line = buffer[position..<end]
                budget += newline + 1 - position
                position = newline + 1
                guard budget <= Self.maximumHeadSize else { throw .headTooLarge(host: host) }
                return line
            }
            scanned = buffer.count - position
            if budget + (buffer.count - position) > Self.maximumHeadSize { throw .headTooLarge(host: host) }
            // Something that does not start like HTTP is refused at once, not waited on.
            if atStart, !Self.couldBeStatusLine(buffer[position...]) { throw .notHTTP(host: host) }
            guard try fill() else {
                if position == buffer.count { return nil }
                throw atStart ? .notHTTP(host: host) : .connectionLost(host: host)
            }
        }
    }

    private static func couldBeStatusLine(_ bytes: ArraySlice<UInt8>) -> Bool {
        let prefix = Array("HTTP/1.".utf8)
        return zip(bytes, prefix).allSatisfy { $0 == $1 }
    }

    /// Reads more bytes into the buffer; false at the end of the stream.
    private mutating func fill() throws(HTTPClientError) -> Bool {
        if closed { return false }
        if position > 0, position == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            position = 0
        } else if position > 64 * 1024 {
            buffer.removeFirst(position)
            position = 0
        }
        let start = buffer.count
        let chunk = 16 * 1024
        buffer.append(contentsOf: repeatElement(0, count: chunk))
        let stream = self.stream
        let outcome = buffer.withUnsafeMutableBytes { raw -> Result<Int, HTTPClientError> in
            do throws(HTTPClientError) {
                return .success(try stream.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[start...])))
            } catch {
                return .failure(error)
            }
        }
        let count: Int
        switch outcome {
        case .success(let read): count = read
        case .failure(let error):
            buffer.removeLast(chunk)
            throw error
        }
        buffer.removeLast(chunk - count)
        if count == 0 { closed = true }
        return count > 0
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte)
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}

extension Substring {
    var trimmingSpacesAndLowercased: String { String(self).trimmingSpaces.lowercased() }
}

extension String {
    var trimmingSpacesAndLowercased: String { trimmingSpaces.lowercased() }
}
