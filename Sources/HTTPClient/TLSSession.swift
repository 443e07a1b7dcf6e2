import COpenSSL
import Glibc

/// A TLS connection over a connected socket: SNI for host names, the certificate checked
/// against the trusted CAs and against the host name or IP address, all reads, writes
/// and the handshake non-blocking under the request's deadline.
final class TLSSession: ByteStream {
    private let socket: Socket
    private let ssl: OpaquePointer
    private let wire: Wire

    /// Shakes hands with `endpoint` over `socket`.
    init(socket: Socket, endpoint: Endpoint, context: TLSContext, wire: Wire) throws(HTTPClientError) {
        guard let ssl = SSL_new(context.context) else {
            throw .system(host: wire.host, reason: "OpenSSL could not start a TLS session")
        }
        self.socket = socket
        self.ssl = ssl
        self.wire = wire
        guard SSL_set_fd(ssl, socket.fd) == 1 else { throw .system(host: wire.host, reason: "OpenSSL could not use the socket") }
        SSL_set_hostflags(ssl, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        if endpoint.isIPLiteral {
            // RFC 6066 §3: no SNI for IP addresses; the certificate must name the address.
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), endpoint.host) == 1 else {
                throw .system(host: wire.host, reason: "OpenSSL could not check the address")
            }
        } else {
            guard SSL_set1_host(ssl, endpoint.host) == 1, ab_SSL_set_tlsext_host_name(ssl, endpoint.host) == 1 else {
                throw .system(host: wire.host, reason: "OpenSSL could not check the host name")
            }
        }
        try handshake()
    }

    deinit {
        // A quiet close: one close_notify if the socket takes it now, no waiting.
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        SSL_free(ssl)
    }

    private func handshake() throws(HTTPClientError) {
        while true {
            try wire.check()
            ERR_clear_error()
            let result = SSL_connect(ssl)
            if result == 1 { return }
            let code = SSL_get_error(ssl, result)
            switch code {
            case SSL_ERROR_WANT_READ: try wire.wait(socket.fd, for: Int16(POLLIN))
            case SSL_ERROR_WANT_WRITE: try wire.wait(socket.fd, for: Int16(POLLOUT))
            default:
                let verification = SSL_get_verify_result(ssl)
                if verification != X509_V_OK {
                    let reason = X509_verify_cert_error_string(verification).map { String(cString: $0) } ?? "verification error \(verification)"
                    ERR_clear_error()
                    switch verification {
                    case Int(X509_V_ERR_HOSTNAME_MISMATCH), Int(X509_V_ERR_IP_ADDRESS_MISMATCH):
                        throw .certificateNameMismatch(host: wire.host, reason: reason)
                    case Int(X509_V_ERR_CERT_HAS_EXPIRED), Int(X509_V_ERR_CERT_NOT_YET_VALID):
                        throw .certificateOutOfDate(host: wire.host, reason: reason)
                    default:
                        throw .certificateNotTrusted(host: wire.host, reason: reason)
                    }
                }
                if ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_WRONG_VERSION_NUMBER {
                    ERR_clear_error()
                    throw .tlsNotSpoken(host: wire.host)
                }
                let reason = Self.lastReason() ?? (code == SSL_ERROR_SYSCALL ? "the server closed the connection" : "error \(code)")
                throw .tlsHandshakeFailed(host: wire.host, reason: reason)
            }
        }
    }

    func write(_ bytes: [UInt8]) throws(HTTPClientError) {
        var offset = 0
        while offset < bytes.count {
            try wire.check()
            ERR_clear_error()
            let result = bytes.withUnsafeBytes { raw in
                raw.baseAddress.map { SSL_write(ssl, $0 + offset, Int32(min(raw.count - offset, 1 << 20))) } ?? 0
            }
            if result > 0 {
                offset += Int(result)
                continue
            }
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ: try wire.wait(socket.fd, for: Int16(POLLIN))
            case SSL_ERROR_WANT_WRITE: try wire.wait(socket.fd, for: Int16(POLLOUT))
            default:
                ERR_clear_error()
                throw .connectionLost(host: wire.host)
            }
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(HTTPClientError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        while true {
            try wire.check()
            ERR_clear_error()
            let result = SSL_read(ssl, base, Int32(min(buffer.count, Int(Int32.max))))
            if result > 0 { return Int(result) }
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ: try wire.wait(socket.fd, for: Int16(POLLIN))
            case SSL_ERROR_WANT_WRITE: try wire.wait(socket.fd, for: Int16(POLLOUT))
            // close_notify: the server ended the stream on purpose.
            case SSL_ERROR_ZERO_RETURN: return 0
            // An end without close_notify (SSL_R_UNEXPECTED_EOF_WHILE_READING, or
            // SSL_ERROR_SYSCALL) is lost, not ended: a close-delimited body may be cut short.
            default:
                ERR_clear_error()
                throw .connectionLost(host: wire.host)
            }
        }
    }

    /// OpenSSL's short reason for the last error ("wrong version number", …), if any.
    private static func lastReason() -> String? {
        let code = ERR_peek_last_error()
        defer { ERR_clear_error() }
        guard code != 0, let text = ERR_reason_error_string(code) else { return nil }
        return String(cString: text)
    }
}
