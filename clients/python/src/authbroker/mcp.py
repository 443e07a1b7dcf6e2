"""Tokens for MCP clients (the Model Context Protocol's authorization, RFC 9728 discovery).

With the MCP Python SDK, 1.x (on `httpx`) and 2.x (on `httpx2`) alike:

    import httpx                                   # mcp 2.x: import httpx2 as httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from authbroker.mcp import BrokerMCPAuth
    async with httpx.AsyncClient(auth=BrokerMCPAuth(URL)) as http, \\
            streamable_http_client(URL, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session: ...

(mcp 1.x also takes it as `streamablehttp_client(URL, auth=BrokerMCPAuth(URL))`.)

For agents that take a command printing headers: `python3 -m authbroker.mcp URL` prints
:func:`mcp_headers` as JSON."""
import json
import sys
from urllib.parse import urlsplit, urlunsplit

from . import errors
from ._flows import AuthFlows
from .authorizer import Authorizer
from .broker import DEFAULT_TIMEOUT, Broker

_BASES = []
try:
    import httpx
    _BASES.append(httpx.Auth)
except ImportError:
    pass
try:
    import httpx2
    _BASES.append(httpx2.Auth)
except ImportError:
    pass


def canonical_resource(server_url):
    """The MCP server's canonical URL, its resource indicator (RFC 8707 §2, MCP
    authorization): scheme and host lowercased, no fragment, no trailing slash unless the
    path is "/" alone. Raises ValueError for what is no http(s) URL or carries userinfo."""
    u = urlsplit(server_url)
    scheme = u.scheme.lower()
    if scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"{server_url!r} is no http(s) URL of an MCP server")
    if "@" in u.netloc:
        raise ValueError("an MCP server's URL names no user: leave the userinfo out")
    host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    netloc = host if u.port is None else f"{host}:{u.port}"
    path = u.path if u.path in ("", "/") else (u.path.rstrip("/") or "/")
    return urlunsplit((scheme, netloc, path, u.query, ""))


class BrokerMCPAuth(AuthFlows, *_BASES):
    """An `httpx.Auth` (and `httpx2.Auth`, when httpx2 is installed), sync and async, that
    authorizes an MCP client's requests with tokens from authbrokerd.

    The resource is the server's canonical URL. The first request asks the daemon for its
    token, waiting up to `wait_for_sign_in` seconds when the account needs a sign-in (the
    daemon asks the user on the desktop). For a server the daemon has not discovered yet,
    the request goes without a token; the 401's `resource_metadata` (RFC 9728 §5.1), else
    its well-known URL, is resolved by the daemon (`discovery.resolve`: only the
    resource's metadata is fetched), and the request sent once more with a token from
    there. An authorization server the user has not trusted raises
    :class:`~authbroker.errors.UntrustedServer`: the user trusts it with `authctl login
    --resource URL`, never this class. A 403 `insufficient_scope` gets one step-up to the
    union of the scopes; `invalid_token` a fresh token; every request is sent twice at
    most, and no token is kept here."""

    def __init__(self, server_url, *, wait_for_sign_in=120, socket_path=None, scopes=None,
                 timeout=DEFAULT_TIMEOUT):
        self.server_url = server_url
        self.resource = canonical_resource(server_url)
        self.authorizer = Authorizer(self.resource, scopes=scopes, wait_for_sign_in=wait_for_sign_in,
                                     timeout=timeout, path=socket_path, discoverable=True)


def mcp_headers(server_url, *, wait_for_sign_in=120, socket_path=None, method="POST"):
    """The headers for requests to the MCP server at `server_url`: `{"Authorization":
    "Bearer …"}`, or for a DPoP-bound token `Authorization: DPoP …` with a `DPoP` proof for
    `method` and `server_url` (good for one request only: a server that checks proofs for
    replay accepts them once). A server the daemon has not discovered is resolved at its
    well-known metadata URL first."""
    resource = canonical_resource(server_url)
    a = Authorizer(resource, wait_for_sign_in=wait_for_sign_in, path=socket_path, discoverable=True)
    htu = urlunsplit(urlsplit(server_url)._replace(fragment=""))
    token, headers = a.headers(method, htu, first=True)
    if token is None:
        with Broker(socket_path) as broker:
            broker.resolve(resource)
        token, headers = a.headers(method, htu)
    return headers


def main(argv=None):
    """`python3 -m authbroker.mcp URL`: the headers as one JSON object on stdout."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python3 -m authbroker.mcp MCP_SERVER_URL", file=sys.stderr)
        return 2
    try:
        print(json.dumps(mcp_headers(argv[0])))
    except (errors.BrokerError, ValueError) as e:
        print(f"authbroker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
