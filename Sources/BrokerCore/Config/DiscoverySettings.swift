import OAuth
import TOML

/// `[discovery]`: what the broker may do for a resource no configured provider lists
/// (docs/configuration.md, "Discovery").
public struct DiscoverySettings: Sendable, Equatable {
    /// Whether, and how, a resource's metadata may lead to a provider nobody configured.
    public enum Mode: String, Sendable, Equatable {
        /// The user says yes to each new authorization server first (the terminal for
        /// `authctl login --resource`, the desktop notification for a waiting program).
        case ask
        /// Every server a resource's metadata names is trusted (a managed machine whose
        /// resources are all the organisation's own).
        case allow
        /// Only configured providers: every other resource is refused, those discovered
        /// earlier included.
        case off
    }

    public var mode: Mode = .ask
    /// Issuers trusted without asking: exact issuer URLs, or `https://host/` prefixes.
    public var trustedIssuers: [String] = []
    /// A Client ID Metadata Document URL the user's organisation hosts (the OAuth draft the
    /// MCP specification prefers): used as the `client_id` at servers that say they take
    /// such documents, instead of registering a client.
    public var clientIDMetadataDocument: String? = nil

    public init(mode: Mode = .ask, trustedIssuers: [String] = [], clientIDMetadataDocument: String? = nil) {
        self.mode = mode
        self.trustedIssuers = trustedIssuers
        self.clientIDMetadataDocument = clientIDMetadataDocument
    }

    /// Whether `issuer` is trusted without asking: `mode = "allow"`, an exact entry, or an
    /// entry ending in "/" that is a prefix of it (`https://host/` trusts every issuer under
    /// a path on that host, never `https://host.evil/`; the bare `https://host` issuer
    /// needs an exact entry).
    public func trusts(_ issuer: String) -> Bool {
        if mode == .allow { return true }
        return trustedIssuers.contains { entry in
            entry == issuer || (entry.hasSuffix("/") && issuer.hasPrefix(entry))
        }
    }
}

extension TableReader {
    /// `[discovery]`, checked key by key.
    func discovery(_ root: TOMLTable) throws(ConfigError) -> DiscoverySettings {
        var settings = DiscoverySettings()
        guard let table = try table(root, "discovery", at: nil) else { return settings }
        try checkKeys(table, allowed: ["mode", "trusted_issuers", "client_id_metadata_document"], at: "discovery")
        if let mode = try string(table, "mode", at: "discovery") {
            guard let m = DiscoverySettings.Mode(rawValue: mode) else {
                throw fail("discovery.mode", "must be \"ask\", \"allow\" or \"off\", not \"\(mode)\"")
            }
            settings.mode = m
        }
        for issuer in try strings(table, "trusted_issuers", at: "discovery") ?? [] {
            do throws(OAuthError) {
                try EndpointPolicy.checkIssuer(issuer, what: "the trusted issuer")
            } catch {
                throw fail("discovery.trusted_issuers", error.message)
            }
            settings.trustedIssuers.append(issuer)
        }
        if let url = try string(table, "client_id_metadata_document", at: "discovery") {
            do throws(OAuthError) {
                try EndpointPolicy.check(url, what: "client_id_metadata_document")
            } catch {
                throw fail("discovery.client_id_metadata_document", error.message)
            }
            guard url.hasPrefix("https://") else {
                throw fail("discovery.client_id_metadata_document", "must be an https URL: servers fetch it to learn who the client is")
            }
            settings.clientIDMetadataDocument = url
        }
        return settings
    }

}
