import TOML

/// The `[daemon]` table: the store, the timeouts, the connection limits and the rest of
/// what the daemon itself does (docs/configuration.md names every key).
extension TableReader {
    func daemon(_ root: TOMLTable) throws(ConfigError) -> DaemonSettings {
        var daemon = DaemonSettings()
        guard let table = try table(root, "daemon", at: nil) else { return daemon }
        try checkKeys(table, allowed: ["store", "refresh_margin", "store_timeout", "http_timeout", "refresh_timeout", "default_provider", "login_timeout", "idle_exit",
                                      "request_line_timeout", "connection_idle_timeout", "max_connections",
                                      "max_requests_in_flight", "sign_in_notifications", "cache_misses_per_minute", "confirm_timeout",
                                      "clock_skew", "kernel_keyring_ttl"], at: "daemon")
        if let store = try string(table, "store", at: "daemon") {
            guard let kind = StoreKind(rawValue: store) else {
                throw fail("daemon.store", "must be \"secret-service\", \"kernel-keyring\" or \"memory\", not \"\(store)\"")
            }
            daemon.store = kind
        }
        if let v = try int(table, "refresh_margin", at: "daemon", range: 0...86_400) { daemon.refreshMargin = v }
        if let v = try int(table, "store_timeout", at: "daemon", range: 1...600) { daemon.storeTimeout = v }
        if let v = try int(table, "http_timeout", at: "daemon", range: 1...600) { daemon.httpTimeout = v }
        if let v = try int(table, "refresh_timeout", at: "daemon", range: 1...600) { daemon.refreshTimeout = v }
        if let v = try int(table, "login_timeout", at: "daemon", range: 10...3600) { daemon.loginTimeout = v }
        if let v = try int(table, "idle_exit", at: "daemon", range: 0...604_800) { daemon.idleExit = v }
        if let v = try int(table, "confirm_timeout", at: "daemon", range: 1...600) { daemon.confirmTimeout = v }
        if let v = try int(table, "clock_skew", at: "daemon", range: 0...3600) { daemon.clockSkew = v }
        if let v = try int(table, "kernel_keyring_ttl", at: "daemon", range: 0...31_536_000) { daemon.kernelKeyringTTL = v }
        if let v = try int(table, "request_line_timeout", at: "daemon", range: 1...600) { daemon.requestLineTimeout = v }
        if let v = try int(table, "connection_idle_timeout", at: "daemon", range: 1...86_400) { daemon.connectionIdleTimeout = v }
        if let v = try int(table, "max_connections", at: "daemon", range: 1...65_536, unit: "a whole number") { daemon.maxConnections = v }
        if let v = try int(table, "max_requests_in_flight", at: "daemon", range: 1...65_536, unit: "a whole number") { daemon.maxRequestsInFlight = v }
        if let v = try int(table, "cache_misses_per_minute", at: "daemon", range: 0...1_000_000, unit: "a whole number") { daemon.cacheMissesPerMinute = v }
        daemon.defaultProvider = try string(table, "default_provider", at: "daemon")
        daemon.signInNotifications = try optionalFlag(table, "sign_in_notifications", at: "daemon") ?? daemon.signInNotifications
        return daemon
    }
}
