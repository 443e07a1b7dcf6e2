import BrokerCore
import BrokerProtocol

extension BrokerError {
    /// The JSON-RPC error a caller receives for this failure.
    var rpcError: RPCError {
        switch self {
        case .loginRequired(let provider, let m):
            return RPCError(.loginRequired, m, data: ErrorData(provider: provider))
        case .providerError(let provider, let code, let m):
            return RPCError(.providerError, m, data: ErrorData(provider: provider, oauthError: code))
        case .providerUnreachable(let provider, let retry, let m):
            return RPCError(.providerUnreachable, m, data: ErrorData(provider: provider, retryAfter: retry))
        case .storeUnavailable(let m, let reason):
            return RPCError(.secretStoreUnavailable, m, data: reason.map { ErrorData(reason: $0) })
        case .unknownProvider(let m):
            return RPCError(.unknownProvider, m)
        case .invalidRequest(let m):
            return RPCError(.invalidParams, m)
        case .loginFailed(let provider, let m):
            return RPCError(.loginFailed, m, data: provider.map { ErrorData(provider: $0) })
        case .forbidden(let m):
            return RPCError(.forbidden, m)
        case .overloaded(let m):
            return RPCError(.overloaded, m)
        case .providerRequestsSpent(let limit, let wait):
            return RPCError(.overloaded, message, data: ErrorData(retryAfter: wait, limit: limit))
        case .configuration(let provider, let m):
            return RPCError(.configuration, m, data: provider.map { ErrorData(provider: $0) })
        case .untrustedServer(let resource, let issuer, let provider, let resourceHost, let issuerHost, _):
            return RPCError(.untrustedServer, message, data: ErrorData(provider: provider, resource: resource, issuer: issuer,
                                                                  resourceHost: resourceHost, issuerHost: issuerHost))
        case .internalError(let m):
            return RPCError(.internalError, m)
        }
    }
}
