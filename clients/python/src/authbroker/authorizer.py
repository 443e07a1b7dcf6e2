"""What the `requests` and `httpx` auth classes share: the headers for one request, and
whether a 401 answer calls for a second try."""
import re

from . import errors
from .broker import DEFAULT_TIMEOUT, Broker, Token, token_params

_ERROR = re.compile(r'\berror\s*=\s*"?([A-Za-z0-9_.-]+)"?')


def challenge_error(www_authenticate):
    """The `error` of a `WWW-Authenticate` challenge (RFC 6750 §3, RFC 9449 §7.1), or None."""
    if not www_authenticate:
        return None
    m = _ERROR.search(www_authenticate)
    return m.group(1) if m else None


class Authorizer:
    """Tokens (and DPoP proofs) from authbrokerd for HTTP requests.

    Each request gets the cached token (the daemon refreshes it when it runs short);
    a DPoP-bound token gets a fresh proof for that request's method and URL. A 401 whose
    challenge says `invalid_token` makes the caller reject the token (`token.reject`) and
    send the request once more with a new one; `use_dpop_nonce` with a `DPoP-Nonce`
    header makes it send once more with a proof carrying that nonce."""

    def __init__(self, resource=None, *, scopes=None, provider=None, account=None, min_ttl=None,
                 params=None, wait_for_sign_in=None, timeout=DEFAULT_TIMEOUT, path=None):
        self.params = token_params(resource, scopes, provider, account, min_ttl, params, wait_for_sign_in)
        self.timeout = timeout
        self.path = path
        # Learnt from the first answer: a provider's tokens are all bound or none is.
        self._dpop = None

    def _broker(self):
        # A connection per request: connecting to a local socket is one system call, and
        # it keeps the auth object free to share between threads and event loops.
        return Broker(self.path, self.timeout)

    def _call_timeout(self):
        wait = self.params.get("wait_for_sign_in")
        return None if wait is None else wait + 30

    def headers(self, method, url, nonce=None):
        """(token, headers) for one request: `Authorization`, and `DPoP` for a bound token."""
        with self._broker() as broker:
            if not self._dpop:
                # Token.from_result: an answer of another shape is BadResponse, not a KeyError.
                token = Token.from_result(broker.call("token.get", self.params, self._call_timeout()))
                self._dpop = token.dpop_bound
                if not self._dpop:
                    return token.access_token, {"Authorization": token.authorization}
            p = dict(self.params, htm=method.upper(), htu=str(url))
            if nonce:
                p["nonce"] = nonce
            answer = Token.from_result(broker.call("dpop.proof", p, self._call_timeout()))
            if not isinstance(answer.proof, str):
                raise errors.BadResponse("authbrokerd answered something unexpected: the dpop.proof answer lacks 'proof'")
            return answer.access_token, {"Authorization": f"DPoP {answer.access_token}", "DPoP": answer.proof}

    def reject(self, access_token):
        with self._broker() as broker:
            broker.reject_token(access_token)

    def retry(self, status, www_authenticate, dpop_nonce):
        """How to try again after an answer: `"new_token"`, `"nonce"` or None (do not)."""
        if status != 401:
            return None
        error = challenge_error(www_authenticate)
        if error == "invalid_token":
            return "new_token"
        if error == "use_dpop_nonce" and dpop_nonce and self._dpop:
            return "nonce"
        return None
