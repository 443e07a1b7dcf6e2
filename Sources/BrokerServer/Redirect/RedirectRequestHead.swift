import HTTPClient

/// The head of an HTTP/1.1 request to a sign-in's loopback listener (RFC 9112 §2–3, §5),
/// read only as far as the listener needs it: the method and the request target.
///
/// The listener answers one request and closes, so it reads no body and keeps no header:
/// the head is checked for its form (a request line, then header lines with a name and a
/// colon, then an empty line) and for its size, and anything else is a 400. That is all a
/// browser's redirect needs, and it keeps an HTTP library out of the daemon for one
/// request a sign-in.
struct RedirectRequestHead: Equatable {
    let method: String
    let target: String

    enum Reading: Equatable {
        /// The head is not complete yet: read more.
        case incomplete
        case head(RedirectRequestHead)
        /// Not an HTTP/1.x request head, or one over the size limits: a 400.
        case invalid
    }

    /// The whole head, empty line included: a browser's redirect is a short request line
    /// and its usual headers, a few kilobytes.
    static let maxBytes = 48 * 1024
    /// One line: the request line with the whole redirect query, or one header.
    static let maxLineBytes = 16 * 1024
    static let maxHeaderCount = 100

    /// Reads a connection's input as it comes, a chunk at a time: each byte is looked at
    /// once, however the peer splits its head.
    struct Reader {
        private var requestLine: [UInt8]?
        private var headers = 0
        private var line: [UInt8] = []
        private var consumed = 0
        private(set) var result = Reading.incomplete

        /// Reads the next chunk; once the result is a head or invalid, it stays so and
        /// the rest of the input is not looked at.
        mutating func read(_ bytes: some Collection<UInt8>) -> Reading {
            guard result == .incomplete else { return result }
            for byte in bytes {
                result = take(byte)
                guard result == .incomplete else { return result }
            }
            // A request line that cannot become one is refused without waiting for the rest.
            if requestLine == nil, !RedirectRequestHead.couldStartRequestLine(line) { result = .invalid }
            return result
        }

        private mutating func take(_ byte: UInt8) -> Reading {
            consumed += 1
            guard consumed <= maxBytes else { return .invalid }
            guard byte == UInt8(ascii: "\n") else {
                guard line.count < maxLineBytes else { return .invalid }
                line.append(byte)
                return .incomplete
            }
            // CRLF ends a line; a bare LF is read as one too (RFC 9112 §2.2).
            if line.last == UInt8(ascii: "\r") { line.removeLast() }
            defer { line.removeAll(keepingCapacity: true) }
            guard let request = requestLine else {
                // Empty lines before the request line are ignored (RFC 9112 §2.2).
                if !line.isEmpty {
                    guard RedirectRequestHead.parseRequestLine(line[...]) != nil else { return .invalid }
                    requestLine = line
                }
                return .incomplete
            }
            if line.isEmpty {
                guard let head = RedirectRequestHead.parseRequestLine(request[...]) else { return .invalid }
                return .head(head)
            }
            headers += 1
            guard headers <= maxHeaderCount, RedirectRequestHead.isHeaderLine(line) else { return .invalid }
            return .incomplete
        }
    }

    /// Whether the start of a request line read so far can still become one: its method,
    /// up to the first space, is a token (a TLS handshake or other binary is refused at once).
    private static func couldStartRequestLine(_ partial: [UInt8]) -> Bool {
        var bytes = partial[...]
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        return bytes.prefix { $0 != UInt8(ascii: " ") }.allSatisfy(HTTPToken.isByte)
    }

    /// `method SP request-target SP HTTP-version` (RFC 9112 §3), HTTP/1.0 or 1.1.
    private static func parseRequestLine(_ line: ArraySlice<UInt8>) -> RedirectRequestHead? {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(HTTPToken.isByte),
              !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8)
        else { return nil }
        return RedirectRequestHead(method: String(decoding: parts[0], as: UTF8.self),
                                   target: String(decoding: parts[1], as: UTF8.self))
    }

    /// `field-name ":" field-value` (RFC 9112 §5): a token right before the colon (no
    /// space between, §5.1), no line folding (§5.2), no control bytes but tab in the value.
    private static func isHeaderLine(_ line: [UInt8]) -> Bool {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              line[..<colon].allSatisfy(HTTPToken.isByte)
        else { return false }
        return line[(colon + 1)...].allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}
