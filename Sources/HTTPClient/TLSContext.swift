import COpenSSL

/// Which certificate authorities a client trusts.
public enum TLSTrust: Sendable, Equatable {
    /// OpenSSL's default store: the system CAs, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when
    /// set (read when the client makes its first TLS connection).
    case system
    /// Only the CAs in this PEM file (for tests).
    case caFile(String)
}

/// One OpenSSL `SSL_CTX` for client connections: TLS 1.2 or later, peer verification on,
/// no compression or renegotiation. Immutable once made, so sessions on many threads
/// share it (OpenSSL locks the context's internals itself).
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Makes the context; nil when OpenSSL cannot (out of memory, unreadable CA file).
    init?(trust: TLSTrust) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { return nil }
        self.context = context
        guard ab_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else { return nil }
        // No SSL_OP_IGNORE_UNEXPECTED_EOF: an end without close_notify is an error, so a
        // close-delimited body cut short (by an attacker on the path, too) is never taken
        // as whole. Framed bodies never read past their end and are not affected.
        _ = SSL_CTX_set_options(context, AB_SSL_OP_NO_COMPRESSION | AB_SSL_OP_NO_RENEGOTIATION)
        _ = ab_SSL_CTX_set_mode(context, AB_SSL_MODE_ENABLE_PARTIAL_WRITE | AB_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        switch trust {
        case .system:
            // Honours SSL_CERT_FILE and SSL_CERT_DIR, like curl and every OpenSSL client.
            guard SSL_CTX_set_default_verify_paths(context) == 1 else { return nil }
        case .caFile(let path):
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else { return nil }
        }
        ERR_clear_error()
    }

    deinit { SSL_CTX_free(context) }
}
