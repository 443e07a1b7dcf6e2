import Glibc

/// A connected, non-blocking TCP socket, closed when released.
final class Socket {
    let fd: Int32

    private init(fd: Int32) {
        self.fd = fd
    }

    deinit { _ = close(fd) }

    /// Resolves `host` and tries each of its addresses in order, each with a non-blocking
    /// connect bounded by the request's deadline (to half the time left while another
    /// address follows). Errors name `wire.host`.
    ///
    /// A host name is looked up on a thread of its own (`HostLookup`), so a stalled
    /// resolver cannot overrun the deadline; an IP address is read at once.
    static func connect(host: String, port: Int, wire: Wire) throws(HTTPClientError) -> Socket {
        try wire.check()
        let (status, list) = Endpoint.isIPv4(host) || Endpoint.isIPv6(host)
            ? HostLookup.addresses(host, port: port, flags: AI_NUMERICHOST)
            : try HostLookup.resolve(host, port: port, wire: wire)
        guard status == 0, let first = list else {
            if let list { freeaddrinfo(list) }
            if status == EAI_SYSTEM || status == EAI_MEMORY {
                throw .system(host: wire.host, reason: "the host name could not be looked up (\(String(cString: gai_strerror(status))))")
            }
            if let why = HostNetwork.lookupFailure(host: wire.host, routeOut: HostNetwork.routeOut) {
                throw .noNetwork(host: wire.host, reason: why)
            }
            throw .hostNotResolved(host: wire.host)
        }
        defer { freeaddrinfo(list) }
        try wire.check()

        var lastError: HTTPClientError = .hostNotResolved(host: wire.host)
        var entry: UnsafeMutablePointer<addrinfo>? = first
        // Read once: nothing to look up per address while every link the watch saw is up.
        let links = HostNetwork.links.flatMap { $0.loopbackUp && $0.otherRunning ? nil : $0 }
        while let address = entry {
            entry = address.pointee.ai_next
            if let why = unreachable(address.pointee, links: links, host: wire.host) {
                // Its link keeps its routes, so connect would not fail: its packets go nowhere.
                lastError = .noNetwork(host: wire.host, reason: why)
                continue
            }
            let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = .system(host: wire.host, reason: "no socket could be made (errno \(errno))")
                continue
            }
            let candidate = Socket(fd: fd)
            if Glibc.connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 { return candidate }
            var failure = errno
            if failure == EINPROGRESS || failure == EINTR {
                // An address that does not answer (an IPv6 route that swallows packets)
                // may take half the time left when another address follows, as in curl.
                let sooner = address.pointee.ai_next == nil ? nil : wire.deadline.halfway
                if let stopped = try waitForConnect(fd, to: address.pointee, sooner: sooner, wire: wire) {
                    lastError = stopped
                    continue
                }
                var value: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) != 0 { value = errno }
                if value == 0 {
                    candidate.disableNagle()
                    return candidate
                }
                failure = value
            }
            lastError = Self.error(failure, host: wire.host)
        }
        throw lastError
    }

    /// Waits for a connect in progress; nil once it is done (or failed: SO_ERROR says), or
    /// why this address is given up: its share of the time ran out, or its link went down
    /// meanwhile. The watch reports a link going down a moment after the kernel does, so a
    /// connect begun just before it (a cable pulled, `lo` taken down) looks again every
    /// half second instead of waiting out the deadline with its packets going nowhere.
    private static func waitForConnect(_ fd: Int32, to address: addrinfo, sooner: Deadline?,
                                       wire: Wire) throws(HTTPClientError) -> HTTPClientError? {
        while true {
            let look = Deadline(secondsFromNow: 0.5)
            do {
                try wire.wait(fd, for: Int16(POLLOUT), sooner: sooner.map { $0.remainingMilliseconds < look.remainingMilliseconds ? $0 : look } ?? look)
                return nil
            } catch .timedOut where !wire.deadline.hasPassed {
                if let why = unreachable(address, links: HostNetwork.links, host: wire.host) {
                    return .noNetwork(host: wire.host, reason: why)
                }
                if let sooner, sooner.hasPassed { return .timedOut(host: wire.host) }
            }
        }
    }

    /// Why `address` cannot be reached over `links` (its link is down), or nil.
    private static func unreachable(_ address: addrinfo, links: HostNetwork.Links?, host: String) -> String? {
        guard let links, let text = HostNetwork.text(of: address.ai_addr, length: address.ai_addrlen) else { return nil }
        return HostNetwork.unreachable(text, host: host, links: links, isOwn: HostNetwork.isOwn)
    }

    private func disableNagle() {
        var on: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    static func error(_ code: Int32, host: String) -> HTTPClientError {
        if let why = HostNetwork.connectFailure(code, host: host) { return .noNetwork(host: host, reason: why) }
        switch code {
        case ECONNREFUSED: return .connectionRefused(host: host)
        case ENETDOWN, EHOSTDOWN, EADDRNOTAVAIL, EAFNOSUPPORT: return .networkUnreachable(host: host)
        case ETIMEDOUT: return .timedOut(host: host)
        default: return .connectionLost(host: host)
        }
    }
}

/// Bytes in and out of one connection, plain or TLS; both block (by polling) under the
/// request's deadline.
protocol ByteStream: AnyObject {
    /// Writes all of `bytes`.
    func write(_ bytes: [UInt8]) throws(HTTPClientError)
    /// Reads up to `buffer.count` bytes; 0 means the peer closed the connection.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(HTTPClientError) -> Int
}

/// A plain TCP connection.
final class PlainStream: ByteStream {
    let socket: Socket
    private let wire: Wire

    init(socket: Socket, wire: Wire) {
        self.socket = socket
        self.wire = wire
    }

    func write(_ bytes: [UInt8]) throws(HTTPClientError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                raw.baseAddress.map { send(socket.fd, $0 + offset, raw.count - offset, Int32(MSG_NOSIGNAL)) } ?? 0
            }
            if sent > 0 {
                offset += sent
            } else if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try wire.wait(socket.fd, for: Int16(POLLOUT))
            } else {
                throw .connectionLost(host: wire.host)
            }
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(HTTPClientError) -> Int {
        while true {
            try wire.check()
            let count = recv(socket.fd, buffer.baseAddress, buffer.count, 0)
            if count >= 0 { return count }
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try wire.wait(socket.fd, for: Int16(POLLIN))
                continue
            }
            throw .connectionLost(host: wire.host)
        }
    }
}
