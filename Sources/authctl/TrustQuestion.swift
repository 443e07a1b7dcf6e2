#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BrokerClient
import BrokerProtocol

/// `authctl login --resource URL` for a resource no configured provider lists: the
/// resource's metadata names its authorization server (RFC 9728), and before anything is
/// sent to a server the user has not trusted, the user is asked here, shown both hosts.
enum TrustQuestion {
    /// The provider to sign in to for `resource`: configured, found before, or trusted now.
    /// Nil when the daemon predates discovery (the plain sign-in then decides).
    static func provider(for resource: String, on broker: BrokerConnection, trustWithoutAsking: Bool) throws(ClientError) -> String? {
        let found: DiscoveryResolveResult
        do {
            found = try broker.call(.discoveryResolve, DiscoveryResolveParams(resource: resource), as: DiscoveryResolveResult.self)
        } catch .rpc(let e) where e.code == RPCErrorCode.methodNotFound.rawValue {
            return nil
        }
        if found.trusted { return found.provider }
        if !trustWithoutAsking {
            try ask(found)
        }
        let trusted = try broker.call(.discoveryTrust, DiscoveryTrustParams(resource: found.resource, issuer: found.issuer),
                                      as: DiscoveryTrustResult.self)
        let how = trusted.client == "registered" ? "registered authbroker as a client there" : "uses authbroker's client there"
        Output.note("Trusted \(Output.safe(found.issuerHost)) for \(Output.safe(found.resourceHost)) (provider \(Output.safe(trusted.provider)); \(how)).")
        return trusted.provider
    }

    /// The question, on stderr; the answer from stdin (a terminal, or a pipe for scripts).
    /// Anything but yes refuses, as the daemon would.
    private static func ask(_ found: DiscoveryResolveResult) throws(ClientError) {
        let resourceHost = Output.safe(found.resourceHost), issuerHost = Output.safe(found.issuerHost)
        Output.note("\(resourceHost) (\(Output.safe(found.resource))) sends its users to sign in at \(issuerHost) (\(Output.safe(found.issuer))).")
        Output.note("authbroker has not used \(issuerHost) before: trusting it lets authbroker register a client there and open its sign-in page.")
        Output.prompt("Trust \(issuerHost) for \(resourceHost)? [y/N] ")
        let answer = readLine(strippingNewline: true)?.lowercased()
        guard answer == "y" || answer == "yes" else {
            throw .rpc(RPCError(.untrustedServer, "\(issuerHost) was not trusted, so nothing was sent to it: run `authctl login --resource \(Output.safe(found.resource))` again to review it, or add its issuer to trusted_issuers under [discovery] in config.toml"))
        }
    }
}
