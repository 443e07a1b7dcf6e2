"""What the `requests`, `httpx` and MCP auth classes share: the headers for one request,
and what a 401 or 403 answer's challenges ask for (authbroker.challenges)."""
import shlex
from urllib.parse import urlsplit

from . import challenges, errors
from .broker import DEFAULT_TIMEOUT, SIGN_IN_GRACE, Broker, Token, token_params

#: What `token.get` answers for a resource the daemon has not discovered yet.
_UNKNOWN_RESOURCE = (errors.InvalidParams, errors.UnknownProvider)
#: What a retry was sent with, for the sentence of a retry that was refused too.
_DONE = {"nonce": "a proof with its DPoP nonce", "more_scopes": "a token for more scopes",
         "new_token": "a fresh token", "discover": "a token from the authorization server its metadata names"}


def where(url):
    """A request's URL for a sentence: without userinfo, query or fragment."""
    u = urlsplit(str(url))
    return f"{u.scheme}://{u.netloc.rpartition('@')[2]}{u.path}"


class Authorizer:
    """Tokens (and DPoP proofs) from authbrokerd for HTTP requests.

    Each request gets the cached token (the daemon refreshes it when it runs short); a
    DPoP-bound token gets a fresh proof for that request's method and URL. A 401 or 403
    gets what its challenge asks for (:func:`authbroker.challenges.decide`), once: a
    fresh token after `invalid_token` (the refused one is rejected with `token.reject`),
    a proof with the server's nonce after `use_dpop_nonce`, a token for more scopes after
    `insufficient_scope` (kept for later requests), `discovery.resolve` of the resource
    after a 401 naming its `resource_metadata`; `insufficient_user_authentication` raises
    :class:`~authbroker.errors.UserAuthenticationRequired`. No token is kept: each request
    asks the daemon, which serves it from memory.

    `discoverable`: the resource may be one the daemon has not discovered yet; a first
    `token.get` it answers with "unknown" (-32602, -32006) lets the request go without a
    token, so that the server's 401 says where its metadata is."""

    def __init__(self, resource=None, *, scopes=None, provider=None, account=None, min_ttl=None,
                 params=None, wait_for_sign_in=None, timeout=DEFAULT_TIMEOUT, path=None, discoverable=False):
        self.resource = resource
        self.params = token_params(resource, scopes, provider, account, min_ttl, params, wait_for_sign_in)
        self.timeout = timeout
        self.path = path
        self.discoverable = discoverable
        # Learnt from the first answer: a provider's tokens are all bound or none is.
        self._dpop = None

    def _broker(self):
        # A connection per request: connecting to a local socket is one system call, and
        # it keeps the auth object free to share between threads and event loops.
        return Broker(self.path, self.timeout)

    def _call_timeout(self):
        wait = self.params.get("wait_for_sign_in")
        return None if wait is None else wait + SIGN_IN_GRACE

    def headers(self, method, url, nonce=None, first=False):
        """(token, headers) for one request: the :class:`Token`, and `Authorization` (and
        `DPoP` for a bound token). On a `first` try of a `discoverable` resource the daemon
        does not know yet: (None, {})."""
        try:
            return self._headers(method, url, nonce)
        except _UNKNOWN_RESOURCE:
            if first and self.discoverable:
                return None, {}
            raise

    def _headers(self, method, url, nonce):
        with self._broker() as broker:
            if not self._dpop:
                # Token.from_result: an answer of another shape is BadResponse, not a KeyError.
                token = Token.from_result(broker.call("token.get", self.params, self._call_timeout()))
                self._dpop = token.dpop_bound
                if not self._dpop:
                    return token, {"Authorization": token.authorization}
            p = dict(self.params, htm=method.upper(), htu=str(url))
            if nonce:
                p["nonce"] = nonce
            answer = Token.from_result(broker.call("dpop.proof", p, self._call_timeout()))
            if not isinstance(answer.proof, str):
                raise errors.BadResponse("authbrokerd answered something unexpected: the dpop.proof answer lacks 'proof'")
            return answer, {"Authorization": f"DPoP {answer.access_token}", "DPoP": answer.proof}

    def decide(self, status, www_authenticate, dpop_nonce, token):
        """What the answer to a request sent with `token` (None: without one) asks for: a
        :class:`~authbroker.challenges.Decision`, or None when it is no 401 or 403."""
        d = challenges.decide(status, www_authenticate, sent_token=token is not None,
                              scopes=self.params.get("scopes") or (token.scope if token else None),
                              dpop=bool(self._dpop), dpop_nonce=dpop_nonce)
        if d is not None and d.action == "discover" and self.resource is None:
            return challenges.Decision(None, d.reason + ", and no resource was given to discover", d.error)
        return d

    def retry_headers(self, decision, token, method, url):
        """The headers of the one retry `decision` (action not None) calls for. An error
        on the way carries the server's answer too, as `authbroker_reason`."""
        try:
            return self._retry_headers(decision, token, method, url)
        except errors.BrokerError as e:
            e.authbroker_reason = self.refused(decision, url)
            raise

    def _retry_headers(self, decision, token, method, url):
        if decision.action == "user_authentication":
            raise self._user_authentication(decision, url)
        if decision.action == "nonce":
            return self.headers(method, url, nonce=decision.nonce)[1]
        if decision.action == "more_scopes":
            # Kept for later requests once a token for them came; a refused step-up keeps none.
            before, self.params = self.params, dict(self.params, scopes=list(decision.scopes))
            try:
                return self.headers(method, url)[1]
            except BaseException:
                self.params = before
                raise
        if decision.action == "discover" or (token is not None and decision.action == "new_token"):
            with self._broker() as broker:
                if decision.action == "discover":
                    broker.resolve(self.resource, decision.resource_metadata)
                if token is not None:
                    broker.reject_token(token.access_token)
        return self.headers(method, url)[1]

    def reject(self, access_token):
        with self._broker() as broker:
            broker.reject_token(access_token)

    @staticmethod
    def refused(decision, url, retried=None):
        """The sentence a refused answer carries (`authbroker_reason`): what the server
        said, and after which retry (`retried`, a Decision) if it came from one."""
        if retried is None:
            return f"{where(url)} refused the request with {decision.reason}"
        return f"{where(url)} refused the request again with {decision.reason}, after {_DONE[retried.action]}"

    def refused_again(self, status, www_authenticate, url, retried):
        """The sentence of a retry's answer when it is a 401 or 403 too, else None."""
        d = challenges.decide(status, www_authenticate, dpop=bool(self._dpop))
        return None if d is None else self.refused(d, url, retried)

    def _user_authentication(self, d, url):
        wanted = [f"{k}={v}" for k, v in (("acr_values", d.acr_values), ("max_age", d.max_age)) if v]
        command = ["authctl", "login"]
        if self.resource:
            command += ["--resource", self.resource]
        elif self.params.get("provider"):
            command += ["--provider", self.params["provider"]]
        for w in wanted:
            command += ["--param", w]
        asks = f" with {' and '.join(wanted)}" if wanted else ""
        reason = self.refused(d, url)
        return errors.UserAuthenticationRequired(
            f"{reason}: it asks for a new sign-in{asks} (RFC 9470), which authbrokerd does not ask the provider "
            f"for on a program's behalf: run `{shlex.join(command)}`, then try again",
            where(url), d.acr_values, d.max_age)
