"""The auth flows of the `httpx` and `httpx2` auth classes (httpx_auth.BrokerAuth,
mcp.BrokerMCPAuth), written against what both packages' requests and responses share,
so that this module imports neither."""
import asyncio
import functools
import inspect

try:
    from anyio import to_thread as _anyio_thread
    _ABANDON = "abandon_on_cancel" if "abandon_on_cancel" in inspect.signature(_anyio_thread.run_sync).parameters \
        else "cancellable"
except ImportError:  # pragma: no cover (httpx brings anyio)
    _anyio_thread = None


async def in_thread(fn, *args, **kw):
    """`fn(*args, **kw)` on a worker thread, so that the event loop (asyncio or trio) never
    blocks on the socket: a refresh at the provider, or a sign-in, may take a while. A
    cancelled caller stops waiting at once."""
    call = functools.partial(fn, *args, **kw)
    if _anyio_thread is not None:
        return await _anyio_thread.run_sync(call, **{_ABANDON: True})
    return await asyncio.to_thread(call)  # pragma: no cover


def _challenges(response):
    headers = response.headers
    return headers.get_list("WWW-Authenticate") if hasattr(headers, "get_list") else headers.get("WWW-Authenticate")


class AuthFlows:
    """`sync_auth_flow` and `async_auth_flow` over `self.authorizer` (an Authorizer): the
    request with its headers, then at most one retry of what a 401 or 403 asks for. A 401
    or 403 that is returned carries `authbroker_reason`."""

    requires_request_body = True  # the body is sent twice when the first try is refused

    def _decide(self, response, token):
        return self.authorizer.decide(response.status_code, _challenges(response),
                                      response.headers.get("DPoP-Nonce"), token)

    def _mark(self, response, url, retried):
        reason = self.authorizer.refused_again(response.status_code, _challenges(response), url, retried)
        if reason is not None:
            response.authbroker_reason = reason

    def sync_auth_flow(self, request):
        a, url = self.authorizer, str(request.url)
        request.read()
        token, headers = a.headers(request.method, url, first=True)
        request.headers.update(headers)
        response = yield request
        d = self._decide(response, token)
        if d is None:
            return
        if d.action is None:
            response.authbroker_reason = a.refused(d, url)
            return
        response.read()
        request.headers.update(a.retry_headers(d, token, request.method, url))
        del token  # held no longer than needed
        response = yield request
        self._mark(response, url, d)

    async def async_auth_flow(self, request):
        a, url = self.authorizer, str(request.url)
        await request.aread()
        token, headers = await in_thread(a.headers, request.method, url, first=True)
        request.headers.update(headers)
        response = yield request
        d = self._decide(response, token)
        if d is None:
            return
        if d.action is None:
            response.authbroker_reason = a.refused(d, url)
            return
        await response.aread()
        request.headers.update(await in_thread(a.retry_headers, d, token, request.method, url))
        del token
        response = yield request
        self._mark(response, url, d)
