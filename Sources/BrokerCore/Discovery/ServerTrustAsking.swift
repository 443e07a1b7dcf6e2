/// A server the user is asked to trust: a resource's metadata named it (RFC 9728), and a
/// program waits for a sign-in there. What the user is shown: both hosts and the issuer.
public struct TrustRequest: Sendable, Equatable {
    public var resource: String
    public var resourceHost: String
    public var issuer: String
    public var issuerHost: String

    public init(resource: String, resourceHost: String, issuer: String, issuerHost: String) {
        self.resource = resource
        self.resourceHost = resourceHost
        self.issuer = issuer
        self.issuerHost = issuerHost
    }
}

/// Asks the user whether to trust an authorization server (the daemon's desktop
/// notification, for a program waiting with `wait_for_sign_in`; `authctl login --resource`
/// asks at the terminal instead). BrokerCore knows nothing of D-Bus: the daemon gives the
/// Broker one of these at start.
public protocol ServerTrustAsking: Sendable {
    /// Shows the question with Trust and Deny and waits for the answer, at most `seconds`.
    func askTrust(_ request: TrustRequest, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer
}
