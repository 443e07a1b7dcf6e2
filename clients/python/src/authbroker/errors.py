"""Why a call to authbrokerd failed.

Every error's message is one sentence a user can read. Errors the daemon answered carry
its JSON-RPC `code`, its `message` and its `data` (docs/protocol.md, "Errors"); each code
has its own class, so a program catches what it can handle:

    try:
        token = authbroker.get_token("https://api.example.com")
    except authbroker.LoginRequired as e:
        print(e)          # not signed in to corp: run `authctl login --provider corp`

No error ever carries a token: the daemon never puts one in an error, and this library
never echoes a request's parameters.
"""


class BrokerError(Exception):
    """Every failure of this library: `message` is the sentence for the user."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


# -- Reaching the daemon --------------------------------------------------------------

class NoSocketPath(BrokerError):
    """Neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set."""


class DaemonNotRunning(BrokerError):
    """Nothing listens on the socket (it does not exist, or refuses the connection)."""

    def __init__(self, message, path):
        super().__init__(message)
        self.path = path


class CannotConnect(BrokerError):
    """The socket exists but cannot be reached: no permission, a path too long…"""

    def __init__(self, message, path):
        super().__init__(message)
        self.path = path


class WrongServer(BrokerError):
    """The socket is served by another user than this process's: nothing was sent to it.

    A socket in a folder another user controls (a wrong AUTHBROKER_SOCKET, a stale
    forward) must not receive a sign-in answer, a client secret or a rejected token."""

    def __init__(self, message, path, uid):
        super().__init__(message)
        self.path = path
        self.uid = uid


class ConnectionLost(BrokerError):
    """Reading or writing the socket failed, or the daemon closed the connection before
    it answered. The connection is closed; open a new one."""


class BadResponse(BrokerError):
    """The daemon answered something that is not a JSON-RPC response of the expected shape."""


class BrokerTimeout(BrokerError):
    """No answer came within the call's timeout."""

    def __init__(self, message, method, timeout):
        super().__init__(message)
        self.method = method
        self.timeout = timeout


# -- What a resource server answered ------------------------------------------------

class UserAuthenticationRequired(BrokerError):
    """A resource server asks for a new sign-in meeting `acr_values` and/or `max_age`
    (RFC 9470 `insufficient_user_authentication`). The daemon does not ask a provider
    for those on a caller's behalf yet: the message says which `authctl login` to run.
    `url` is the request's (without its query); `authbroker_reason` what the server said."""

    def __init__(self, message, url, acr_values=None, max_age=None):
        super().__init__(message)
        self.url = url
        self.acr_values = acr_values
        self.max_age = max_age


# -- Errors the daemon answered -------------------------------------------------------

class RPCError(BrokerError):
    """A JSON-RPC error answer: `code`, `message` (the daemon's sentence) and `data`.

    The subclasses below stand for the documented codes; an unknown code is an RPCError
    itself, so a newer daemon's errors still arrive with their sentence."""

    code = None

    def __init__(self, code, message, data=None):
        super().__init__(message or f"authbrokerd answered error {code}")
        self.code = code
        self.data = data if isinstance(data, dict) else {}

    @property
    def provider(self):
        """The provider the error is about, when the daemon named one."""
        return self.data.get("provider")


class ParseError(RPCError):
    """-32700: the request line was not JSON."""
    code = -32700


class InvalidRequest(RPCError):
    """-32600: not a JSON-RPC request."""
    code = -32600


class MethodNotFound(RPCError):
    """-32601: the daemon does not know the method (an older daemon?)."""
    code = -32601


class InvalidParams(RPCError):
    """-32602: a parameter has the wrong type or value; the message names it."""
    code = -32602


class InternalError(RPCError):
    """-32603: the daemon failed; its log says why."""
    code = -32603


class LoginRequired(RPCError):
    """-32001: never signed in, or the provider refused the refresh token: run `authctl login`."""
    code = -32001


class ForbiddenByPolicy(RPCError):
    """-32002: an [[allow]] rule does not grant this program that token."""
    code = -32002


class ProviderError(RPCError):
    """-32003: the provider answered an OAuth error, in `oauth_error`."""
    code = -32003

    @property
    def oauth_error(self):
        return self.data.get("oauth_error")


class ProviderUnreachable(RPCError):
    """-32004: the provider did not answer; try again after `retry_after` seconds."""
    code = -32004

    @property
    def retry_after(self):
        return self.data.get("retry_after")


class SecretStoreUnavailable(RPCError):
    """-32005: the Secret Service is absent, locked or not answering."""
    code = -32005


class UnknownProvider(RPCError):
    """-32006: no such provider, or several configured and none named."""
    code = -32006


class SignInFailed(RPCError):
    """-32007: the sign-in was refused, expired, or replaced."""
    code = -32007


class RequestTooLarge(RPCError):
    """-32008: the request line was over the daemon's size cap."""
    code = -32008


class Overloaded(RPCError):
    """-32009: too many requests or sign-ins at once; try again shortly (`limit`)."""
    code = -32009


class ConfigurationError(RPCError):
    """-32010: config.toml does not allow this; the message names the key to set."""
    code = -32010


class UntrustedServer(RPCError):
    """-32011: the resource's metadata names an authorization server the user has not
    trusted yet, and nothing was sent to it: the message says to run
    `authctl login --resource URL`, which shows both hosts and asks. No program trusts a
    server on the user's behalf: this library never does."""
    code = -32011

    @property
    def resource(self):
        return self.data.get("resource")

    @property
    def issuer(self):
        return self.data.get("issuer")

    @property
    def resource_host(self):
        return self.data.get("resource_host")

    @property
    def issuer_host(self):
        return self.data.get("issuer_host")


_BY_CODE = {cls.code: cls for cls in (
    ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError, LoginRequired,
    ForbiddenByPolicy, ProviderError, ProviderUnreachable, SecretStoreUnavailable,
    UnknownProvider, SignInFailed, RequestTooLarge, Overloaded, ConfigurationError, UntrustedServer)}


def rpc_error(error):
    """The typed exception for a JSON-RPC `error` member."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    cls = _BY_CODE.get(code, RPCError)
    return cls(code, message if isinstance(message, str) else "", data)
