/// Error codes: JSON-RPC 2.0's own (-32700…-32600) and authbroker's (-32001…-32099, the
/// range JSON-RPC reserves for implementation-defined server errors). docs/protocol.md
/// lists them with what each means for the caller.
public enum RPCErrorCode: Int, Sendable, CaseIterable {
    // JSON-RPC 2.0
    case parseError = -32700
    case invalidRequest = -32600
    case methodNotFound = -32601
    case invalidParams = -32602
    case internalError = -32603

    // authbroker
    /// The account has no usable refresh token: the user must sign in again.
    case loginRequired = -32001
    /// The caller's policy does not grant this token.
    case forbidden = -32002
    /// The provider answered with an OAuth error (`data.oauth_error`).
    case providerError = -32003
    /// The provider could not be reached, timed out or answered nonsense.
    case providerUnreachable = -32004
    /// The Secret Service is absent, locked or not answering.
    case secretStoreUnavailable = -32005
    /// No provider of that name is configured, or none was named and several are.
    case unknownProvider = -32006
    /// The sign-in was refused by the user, expired, or its id is unknown.
    case loginFailed = -32007
    /// A request line exceeded the size cap; the connection is closed after this answer.
    case requestTooLarge = -32008
    /// The daemon is at a limit (connections, pending sign-ins).
    case overloaded = -32009
    /// config.toml does not allow what was asked (e.g. a provider endpoint it must name).
    case configuration = -32010
    /// A resource's metadata names an authorization server the user has not trusted yet
    /// (`data`: resource, issuer, their hosts, the provider): nothing was sent to it.
    case untrustedServer = -32011
}
