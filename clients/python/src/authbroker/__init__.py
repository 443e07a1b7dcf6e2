"""A client for authbrokerd, the per-user OAuth 2.0 / OpenID Connect token broker.

    import authbroker
    token = authbroker.get_token("https://api.example.com")
    headers = {"Authorization": token.authorization}

For `requests` and `httpx`: `authbroker.requests_auth.BrokerAuth` and
`authbroker.httpx_auth.BrokerAuth`; for MCP clients `authbroker.mcp.BrokerMCPAuth`;
`authbroker.challenges` reads `WWW-Authenticate`. The protocol is docs/protocol.md of authbroker;
this core needs nothing beyond Python's standard library.
"""
from .broker import DEFAULT_TIMEOUT, Broker, Token, get_token, socket_path
from .errors import (BadResponse, BrokerError, BrokerTimeout, CannotConnect, ConfigurationError,
                     ConnectionLost, DaemonNotRunning, ForbiddenByPolicy, InternalError, InvalidParams,
                     InvalidRequest, LoginRequired, MethodNotFound, NoSocketPath, Overloaded, ParseError,
                     ProviderError, ProviderUnreachable, RequestTooLarge, RPCError, SecretStoreUnavailable,
                     SignInFailed, UnknownProvider, UntrustedServer, UserAuthenticationRequired,
                     WrongServer)

__all__ = [
    "DEFAULT_TIMEOUT", "Broker", "Token", "get_token", "socket_path",
    "BadResponse", "BrokerError", "BrokerTimeout", "CannotConnect", "ConfigurationError",
    "ConnectionLost", "DaemonNotRunning", "ForbiddenByPolicy", "InternalError", "InvalidParams",
    "InvalidRequest", "LoginRequired", "MethodNotFound", "NoSocketPath", "Overloaded", "ParseError",
    "ProviderError", "ProviderUnreachable", "RequestTooLarge", "RPCError", "SecretStoreUnavailable",
    "SignInFailed", "UnknownProvider", "UntrustedServer", "UserAuthenticationRequired", "WrongServer",
]
__version__ = "0.1.0"
