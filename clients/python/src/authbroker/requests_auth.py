"""An auth class for `requests` (pip install authbroker[requests])."""
import requests

from .authorizer import Authorizer


class BrokerAuth(requests.auth.AuthBase):
    """Adds `Authorization` (and `DPoP`) from authbrokerd to each request.

        import requests
        from authbroker.requests_auth import BrokerAuth
        r = requests.get("https://api.example.com/v1/items", auth=BrokerAuth("https://api.example.com"))

    Takes the parameters of `authbroker.get_token`. On a 401 that says `invalid_token`
    the token is rejected (`token.reject`) and the request sent once more with a new one;
    a request whose body is a stream that cannot be rewound is not retried."""

    def __init__(self, resource=None, **kw):
        self.authorizer = Authorizer(resource, **kw)

    def __call__(self, request):
        token, headers = self.authorizer.headers(request.method, request.url)
        request.headers.update(headers)
        request.register_hook("response", _Retry(self.authorizer, token))
        return request


class _Retry:
    """The response hook of one request: at most one second try."""

    def __init__(self, authorizer, token):
        self.authorizer = authorizer
        self.token = token

    def __call__(self, response, **kwargs):
        how = self.authorizer.retry(response.status_code, response.headers.get("WWW-Authenticate"),
                                    response.headers.get("DPoP-Nonce"))
        body = response.request.body
        if how is None or (body is not None and not isinstance(body, (bytes, str))):
            return response
        if how == "new_token":
            self.authorizer.reject(self.token)
            _, headers = self.authorizer.headers(response.request.method, response.request.url)
        else:
            _, headers = self.authorizer.headers(response.request.method, response.request.url,
                                                 nonce=response.headers.get("DPoP-Nonce"))
        response.content  # read it, so the connection goes back to the pool
        response.close()
        again = response.request.copy()
        again.headers.update(headers)
        again.hooks["response"] = []  # one retry, no more
        sent = response.connection.send(again, **kwargs)
        sent.history.append(response)
        sent.request = again
        return sent
