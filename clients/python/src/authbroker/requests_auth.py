"""An auth class for `requests` (pip install authbroker[requests])."""
import requests

from .authorizer import Authorizer


class BrokerAuth(requests.auth.AuthBase):
    """Adds `Authorization` (and `DPoP`) from authbrokerd to each request.

        import requests
        from authbroker.requests_auth import BrokerAuth
        r = requests.get("https://api.example.com/v1/items", auth=BrokerAuth("https://api.example.com"))

    Takes the parameters of `authbroker.get_token`. A 401 or 403 gets what its
    `WWW-Authenticate` challenge asks for, with the request sent once more at most
    (:class:`authbroker.authorizer.Authorizer`): a fresh token after `invalid_token`, more
    scopes after `insufficient_scope`, discovery after `resource_metadata`, the server's
    DPoP nonce. A request whose body is a stream that cannot be rewound is not retried. A
    401 or 403 that is returned carries `authbroker_reason`: what the server said, and
    after which retry."""

    def __init__(self, resource=None, **kw):
        self.authorizer = Authorizer(resource, **kw)

    def __call__(self, request):
        token, headers = self.authorizer.headers(request.method, request.url, first=True)
        request.headers.update(headers)
        request.register_hook("response", _Retry(self.authorizer, token))
        return request


class _Retry:
    """The response hook of one request: at most one second try."""

    def __init__(self, authorizer, token):
        self.authorizer = authorizer
        self.token = token

    def __call__(self, response, **kwargs):
        authorizer = self.authorizer
        url = response.request.url
        d = authorizer.decide(response.status_code, response.headers.get("WWW-Authenticate"),
                              response.headers.get("DPoP-Nonce"), self.token)
        if d is None:
            return response
        body = response.request.body
        if d.action is None or (body is not None and not isinstance(body, (bytes, str))):
            response.authbroker_reason = authorizer.refused(d, url) + (
                "" if d.action is None else ", and its body is a stream that cannot be sent again")
            return response
        headers = authorizer.retry_headers(d, self.token, response.request.method, url)
        self.token = None  # held no longer than the request
        response.content  # read it, so the connection goes back to the pool
        response.close()
        again = response.request.copy()
        again.headers.update(headers)
        again.hooks["response"] = []  # one retry, no more
        sent = response.connection.send(again, **kwargs)
        sent.history.append(response)
        sent.request = again
        reason = authorizer.refused_again(sent.status_code, sent.headers.get("WWW-Authenticate"), url, d)
        if reason is not None:
            sent.authbroker_reason = reason
        return sent
