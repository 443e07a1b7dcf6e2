"""An auth class for `httpx`, sync and async (pip install authbroker[httpx])."""
import asyncio

import httpx

from .authorizer import Authorizer


class BrokerAuth(httpx.Auth):
    """Adds `Authorization` (and `DPoP`) from authbrokerd to each request, for
    `httpx.Client` and `httpx.AsyncClient` alike.

        import httpx
        from authbroker.httpx_auth import BrokerAuth
        with httpx.Client(auth=BrokerAuth("https://api.example.com")) as client:
            client.get("https://api.example.com/v1/items")

    Takes the parameters of `authbroker.get_token`. On a 401 that says `invalid_token`
    the token is rejected (`token.reject`) and the request sent once more with a new one.
    The async flow asks the daemon on a worker thread, so the event loop never blocks on
    the socket (a refresh at the provider may take a while)."""

    requires_request_body = True  # the body is sent twice when the first try is refused

    def __init__(self, resource=None, **kw):
        self.authorizer = Authorizer(resource, **kw)

    def sync_auth_flow(self, request):
        token, headers = self.authorizer.headers(request.method, str(request.url))
        request.headers.update(headers)
        response = yield request
        how = self._retry(response)
        if how is None:
            return
        response.read()
        if how == "new_token":
            self.authorizer.reject(token)
            _, headers = self.authorizer.headers(request.method, str(request.url))
        else:
            _, headers = self.authorizer.headers(request.method, str(request.url),
                                                 nonce=response.headers.get("DPoP-Nonce"))
        request.headers.update(headers)
        yield request

    async def async_auth_flow(self, request):
        token, headers = await asyncio.to_thread(self.authorizer.headers, request.method, str(request.url))
        request.headers.update(headers)
        response = yield request
        how = self._retry(response)
        if how is None:
            return
        await response.aread()
        if how == "new_token":
            await asyncio.to_thread(self.authorizer.reject, token)
            _, headers = await asyncio.to_thread(self.authorizer.headers, request.method, str(request.url))
        else:
            _, headers = await asyncio.to_thread(self.authorizer.headers, request.method, str(request.url),
                                                 response.headers.get("DPoP-Nonce"))
        request.headers.update(headers)
        yield request

    def _retry(self, response):
        return self.authorizer.retry(response.status_code, response.headers.get("WWW-Authenticate"),
                                     response.headers.get("DPoP-Nonce"))
