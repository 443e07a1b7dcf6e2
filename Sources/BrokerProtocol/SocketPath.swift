#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon listens and clients connect: `$AUTHBROKER_SOCKET`, else
/// `$XDG_RUNTIME_DIR/authbroker/socket`. Nil when neither is set.
public enum SocketPath {
    public static let environmentVariable = "AUTHBROKER_SOCKET"

    public static func resolve(environment get: (String) -> String? = { name in
        guard let p = getenv(name) else { return nil }
        return String(cString: p)
    }) -> String? {
        if let explicit = get(environmentVariable), !explicit.isEmpty { return explicit }
        if let runtime = get("XDG_RUNTIME_DIR"), !runtime.isEmpty { return runtime + "/authbroker/socket" }
        return nil
    }
}

/// The version both binaries report.
public enum BrokerVersion {
    public static let current = "0.1.0"
}
