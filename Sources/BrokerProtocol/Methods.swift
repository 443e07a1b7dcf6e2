/// The method names the daemon serves. Adding one here, with its params and result, and
/// registering it in its service (BrokerCore's `MethodSpec`, with who may call it) is all
/// a new method needs: the server's method table serves any registration.
public enum RPCMethod: String, Sendable, CaseIterable {
    case tokenGet = "token.get"
    case dpopProof = "dpop.proof"
    case tokenReject = "token.reject"
    case tokenExchange = "token.exchange"
    case accountList = "account.list"
    case loginStart = "login.start"
    case loginWait = "login.wait"
    case loginAnswer = "login.answer"
    case logout = "logout"
    case accountWhoami = "account.whoami"
    case accountUserinfo = "account.userinfo"
    case providerSetSecret = "provider.set_secret"
    case daemonStatus = "daemon.status"
    case eventsSubscribe = "events.subscribe"
    case eventsUnsubscribe = "events.unsubscribe"
    case discoveryResolve = "discovery.resolve"
    case discoveryTrust = "discovery.trust"
    case providerRename = "provider.rename"
    case awsCredentials = "aws.credentials"
    case accountIDToken = "account.id_token"
    case grantsList = "grants.list"
    case grantsRevoke = "grants.revoke"
}

/// Params of methods that take none.
public struct NoParams: Codable, Sendable {
    public init() {}
}
