"""An auth class for `httpx`, sync and async (pip install authbroker[httpx])."""
import httpx

from ._flows import AuthFlows
from .authorizer import Authorizer


class BrokerAuth(AuthFlows, httpx.Auth):
    """Adds `Authorization` (and `DPoP`) from authbrokerd to each request, for
    `httpx.Client` and `httpx.AsyncClient` alike.

        import httpx
        from authbroker.httpx_auth import BrokerAuth
        with httpx.Client(auth=BrokerAuth("https://api.example.com")) as client:
            client.get("https://api.example.com/v1/items")

    Takes the parameters of `authbroker.get_token`. A 401 or 403 gets what its
    `WWW-Authenticate` challenge asks for, with the request sent once more at most
    (:class:`authbroker.authorizer.Authorizer`): a fresh token after `invalid_token`, more
    scopes after `insufficient_scope`, discovery after `resource_metadata`, the server's
    DPoP nonce. A 401 or 403 that is returned carries `authbroker_reason`: what the server
    said, and after which retry. The async flow asks the daemon on a worker thread, so
    the event loop never blocks on the socket (a refresh at the provider may take a while)."""

    def __init__(self, resource=None, **kw):
        self.authorizer = Authorizer(resource, **kw)
