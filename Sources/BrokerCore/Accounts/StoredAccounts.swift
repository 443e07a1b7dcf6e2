import SecretStore

/// What a read of the store yields for a configuration: the accounts of its providers and
/// the client secrets kept for them (`authctl set-secret`). Items of providers that are
/// not configured, or that name another issuer or client, are left out.
struct StoredAccounts: Sendable {
    var accounts: [Account] = []
    var clientSecrets: [String: String] = [:]

    /// - Parameter only: the providers to take items for; nil for all configured ones.
    init(items: [StoredCredential], config: BrokerConfig, only: Set<String>? = nil) {
        for item in items {
            guard only?.contains(item.provider) ?? true,
                  let p = config.provider(named: item.provider), p.issuer == item.issuer, p.clientID == item.clientID
            else { continue }
            if DiscoveredProviderItem.provider(from: item) != nil { continue }
            if let secret = ClientSecretItem.secret(from: item) {
                clientSecrets[p.name] = secret
            } else if let account = AccountSecret.account(from: item) {
                accounts.append(account)
            }
        }
    }
}
