"""A STUB OpenID provider for fault tests: the failures a real provider will not produce on
demand (refused connections, 5xx, garbage, slow or no answers) come from here.

It serves a discovery document, a device authorization endpoint that approves at once, a
token endpoint (device grant and refresh grant, rotating refresh tokens) whose behaviour
the test switches with `stub.mode`, and a JWKS with an RSA key made at start: ID tokens are
signed RS256, because the daemon checks their signatures.

Modes of the token endpoint (discovery, JWKS and device authorization always answer):
  ok        tokens (a rotated refresh token on every refresh)
  http500   HTTP 500 with an HTML body
  garbage   HTTP 200 with a body that is not JSON
  reset     the connection is closed without an answer
  slow      a correct-looking answer, but only after `stub.delay` seconds (tokens not kept)
  hang      no answer until the stub stops or `release_hung()`
  refuse    the listening socket is closed: connections are refused (see `refuse()`)

Switches for the provider behaviours of docs/providers.md (tests/test_providers.py):
  device_id_token            False: device grant answers carry no ID token (RFC 8628 needs none)
  device_refresh_token       False: device grant answers carry no refresh token, as a provider
                             that grants offline_access only with prompt=consent answers
  id_token_names             False: ID tokens carry no preferred_username, email or name
  userinfo_claims            extra claims of the userinfo answer (besides sub)
  userinfo_checks_audience   True: userinfo refuses (401) a token restricted to resources
  restrict_default_audience  True: a token asked without `resource` is still restricted to
                             the resources the sign-in asked for
  discovery_omits            discovery members left out, although the endpoints are served
  token_path                 where the token endpoint is (the old path then answers 404)
  device_expires_in          seconds a device code lives (default 60)
  device_interval            seconds the device authorization answer asks between polls (default 1)
  device_delay               seconds the device authorization endpoint waits before it answers
  code_answer_hold           a threading.Event: the authorization code grant issues its tokens,
                             sets `code_redeeming`, and answers only once the event is set
  device_error               an OAuth error code the device grant answers with (HTTP 400) instead
                             of tokens: "authorization_pending" for a code nobody approves
  clock_offset               seconds the stub's clock runs ahead of the machine's (negative:
                             behind), as its Date headers show
Counters: discovery_requests; `revoked` holds every token revoked at /revoke, `access` every
access token issued with its resources.

Every token request's form is kept in `token_forms`, for tests of the parameters sent
(Glewlwyd ignores parameters it does not know, so it cannot show them).

`stub.one_live_access_token = True` makes it behave like providers that keep one live access
token per refresh-token chain (Ory Hydra): every refresh, whatever its resource, scope or
audience, revokes the access token the chain's previous grant or refresh issued. Its
resource endpoint, `GET /resource` with `Authorization: Bearer …`, answers 200 for a live
token and 401 for a revoked or unknown one, as an API would (`stub.alive(token)` asks it
without HTTP). `stub.revoke(token)` revokes one access token out of band.

Extensions add endpoints and grants without growing this file: `grant_handlers[grant_type]`
and `post_handlers[path]` are functions of the form ({name: [values]}) returning (status,
JSON body); `discovery_extra` adds discovery members (stub_exchange.py, stub_first_party.py);
`code_verifier_check(code, verifier)` makes the authorization code grant check PKCE.

Nothing here prints a token.
"""
import base64
import http.server
import json
import secrets
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(n):
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class StubProvider:
    """An OIDC provider STUB on 127.0.0.1 (or another loopback address, `host`); `start()`
    it, `stop()` it."""

    def __init__(self, client_id="authbroker", access_token_life=60, subject="stub-user-1", host="127.0.0.1"):
        self.host = host
        self.client_id = client_id
        self.access_token_life = access_token_life
        self.subject = subject
        self.mode = "ok"
        self.delay = 5.0
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "stub-" + secrets.token_hex(4)
        self.lock = threading.Lock()
        self.released = threading.Event()  # set at stop: hanging answers end
        self.token_requests = 0    # every request that reached the token endpoint
        self.refresh_requests = 0  # of those, refresh grants
        self.valid_refresh = set()  # refresh tokens that still work (one use each)
        self.last_issued_refresh = None  # the newest refresh token delivered in an ok answer
        self.issued = []  # every token and device code this stub handed out (for secret scans)
        self.device_id_token = True
        self.device_refresh_token = True
        self.id_token_names = True
        self.userinfo_claims = {}
        self.userinfo_checks_audience = False
        self.restrict_default_audience = False
        self.discovery_omits = set()
        self.token_path = "/token"
        self.device_expires_in = 60
        self.code_answer_hold = None
        self.code_redeeming = threading.Event()
        self.device_interval = 1
        self.device_delay = 0
        self.device_error = None
        self.clock_offset = 0
        self.discovery_requests = 0
        self.revoked = set()
        self.access = {}  # access token -> resources it is restricted to ([] = none)
        self.grants = {}  # device code / refresh token / code -> resources of the sign-in
        self.nonces = {}  # authorization code -> nonce
        self.token_forms = []  # the form of every token request, as {name: [values]}
        self.one_live_access_token = False
        self.live_access = {}  # access token -> expiry (Unix seconds), while it is not revoked
        self.chain_of = {}  # refresh token -> its chain (the grant it descends from)
        self.chain_access = {}  # chain -> the access token its last grant or refresh issued
        self.resource_calls = []  # what /resource answered, True (200) or False (401), in order
        self.grant_handlers = {}
        self.post_handlers = {}
        self.discovery_extra = {}
        self.code_verifier_check = None  # (code, code_verifier) -> bool, for PKCE (stub_first_party.py)
        # Refresh answers as a test wants them: `refresh_answer_extra` is merged into every
        # ok refresh answer (an odd expires_in, say; None leaves a member out);
        # `refresh_refusal(form)` may return
        # (status, body dict, headers dict) to answer a refresh with instead, the refresh
        # token left valid (an error the provider words as it likes).
        self.refresh_answer_extra = {}
        self.refresh_refusal = None
        # Seconds an ok refresh answer is held back after the refresh token rotated: the
        # provider took the refresh, its answer is still on the way.
        self.refresh_answer_delay = 0
        self.valid_refresh_keep = False  # a refresh token stays valid after use (no rotation)
        self.discovery_refusal = None  # (status, body dict, headers dict) to answer discovery with
        self.server = None
        self.port = None
        self.thread = None

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def issuer(self):
        return f"http://{self.host}:{self.port}"

    def start(self):
        self._serve(port=self.port or 0)
        return self

    def _serve(self, port):
        stub = self

        class Handler(_Handler):
            provider = stub

        self.server = http.server.ThreadingHTTPServer((self.host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def refuse(self):
        """Closes the listening socket: connections to the port are refused until `resume()`."""
        self.mode = "refuse"
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def resume(self, mode="ok"):
        if self.server is None:
            self._serve(port=self.port)
        self.mode = mode

    def stop(self):
        self.released.set()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def release_hung(self):
        """Ends every answer `hang` (or `slow`) holds now: each connection closes without an
        answer, as a provider that drops them. A later `hang` holds again."""
        held, self.released = self.released, threading.Event()
        held.set()

    def counts(self):
        with self.lock:
            return self.token_requests, self.refresh_requests

    # --- tokens ------------------------------------------------------------------------

    def _id_token(self, nonce=None):
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"iss": self.issuer, "aud": self.client_id, "sub": self.subject, "iat": now,
                  "exp": now + 600}
        if self.id_token_names:
            claims["preferred_username"] = "stub-user"
        if nonce:
            claims["nonce"] = nonce
        signing_input = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64(signature)

    def _tokens(self, with_id_token, resources=(), grant=(), nonce=None):
        refresh = "stub-rt-" + secrets.token_urlsafe(24)
        access = "stub-at-" + secrets.token_urlsafe(24)
        answer = {"access_token": access, "token_type": "Bearer", "expires_in": self.access_token_life,
                  "refresh_token": refresh, "scope": "openid offline_access"}
        if with_id_token:
            answer["id_token"] = self._id_token(nonce)
        with self.lock:
            self.access[access] = list(resources)
            self.grants[refresh] = list(grant)
        return answer

    def live_tokens(self, tokens):
        """Those of `tokens` the stub has not revoked."""
        with self.lock:
            return [t for t in tokens if t not in self.revoked]

    def alive(self, access_token):
        """Whether the resource endpoint would accept this access token now."""
        with self.lock:
            return access_token not in self.revoked and self.live_access.get(access_token, 0) > time.time()

    def revoke(self, access_token):
        """Revokes one access token, as the provider may at any time."""
        with self.lock:
            self.live_access.pop(access_token, None)
            self.revoked.add(access_token)

    def _keep(self, answer, presented=None):
        """Makes the answer's refresh token the valid one and remembers what was issued.
        `presented` is the refresh token this answer was a refresh of (None: a new grant)."""
        with self.lock:
            chain = self.chain_of.get(presented) if presented else answer["refresh_token"]
            self.chain_of[answer["refresh_token"]] = chain
            previous = self.chain_access.get(chain)
            if self.one_live_access_token and previous:
                self.live_access.pop(previous, None)
                self.revoked.add(previous)
            self.chain_access[chain] = answer["access_token"]
            self.live_access[answer["access_token"]] = time.time() + self.access_token_life
            self.valid_refresh.add(answer["refresh_token"])
            self.last_issued_refresh = answer["refresh_token"]
            self.issued += [answer["access_token"], answer["refresh_token"]]
            if "id_token" in answer:
                self.issued.append(answer["id_token"])

    def jwks(self):
        numbers = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                          "n": _int_b64(numbers.n), "e": _int_b64(numbers.e)}]}

    def discovery(self):
        i = self.issuer
        doc = {"issuer": i, "token_endpoint": i + self.token_path, "device_authorization_endpoint": i + "/device",
               "jwks_uri": i + "/jwks", "authorization_endpoint": i + "/authorize",
               "userinfo_endpoint": i + "/userinfo", "revocation_endpoint": i + "/revoke",
               "introspection_endpoint": i + "/introspect",
               "grant_types_supported": ["refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
               "id_token_signing_alg_values_supported": ["RS256"],
               "response_types_supported": ["code"], "subject_types_supported": ["public"]}
        doc.update(self.discovery_extra)
        return {k: v for k, v in doc.items() if k not in self.discovery_omits}

    def _bearer(self, headers):
        auth = headers.get("Authorization") or ""
        return auth[7:] if auth.startswith("Bearer ") else None

    def userinfo(self, headers):
        """(status, body) of the userinfo endpoint for the request's bearer token."""
        token = self._bearer(headers)
        with self.lock:
            resources = self.access.get(token)
            dead = token in self.revoked
        if resources is None or dead:
            return 401, {"error": "invalid_token"}
        if self.userinfo_checks_audience and resources:
            return 401, {"error": "invalid_token", "error_description": "the token's audience is not this endpoint"}
        return 200, dict(self.userinfo_claims, sub=self.subject)


class _Handler(http.server.BaseHTTPRequestHandler):
    provider = None  # set by StubProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def date_time_string(self, timestamp=None):
        """The Date header, by the stub's own clock (`clock_offset`)."""
        return super().date_time_string(time.time() + self.provider.clock_offset if timestamp is None else timestamp)

    def _json(self, status, body, headers=None):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(raw)

    def _raw(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        p = self.provider
        if self.path == "/.well-known/openid-configuration":
            with p.lock:
                p.discovery_requests += 1
            if p.discovery_refusal:
                self._json(*p.discovery_refusal)
                return
            self._json(200, p.discovery())
        elif self.path == "/userinfo":
            self._json(*p.userinfo(self.headers))
        elif self.path.startswith("/authorize?"):
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            code = "stub-code-" + secrets.token_urlsafe(16)
            with p.lock:
                p.nonces[code] = q.get("nonce", [None])[0]
                p.grants[code] = q.get("resource", [])
            location = q["redirect_uri"][0] + "?" + urllib.parse.urlencode(
                {"code": code, "state": q["state"][0], "iss": p.issuer})
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
        elif self.path == "/jwks":
            self._json(200, p.jwks())
        elif self.path == "/resource":
            auth = self.headers.get("Authorization") or ""
            ok = auth.startswith("Bearer ") and p.alive(auth[len("Bearer "):])
            with p.lock:
                p.resource_calls.append(ok)
            self._json(200 if ok else 401, {"ok": ok})
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self):
        p = self.provider
        length = int(self.headers.get("Content-Length") or 0)
        form = urllib.parse.parse_qs(self.rfile.read(length).decode())
        if self.path == "/revoke":
            with p.lock:
                p.revoked.add(form.get("token", [""])[0])
                p.valid_refresh.discard(form.get("token", [""])[0])
            self._raw(200, b"", "text/plain")
            return
        if self.path == "/introspect":
            token = form.get("token", [""])[0]
            with p.lock:
                active = token in p.access and token not in p.revoked
            self._json(200, {"active": True, "sub": p.subject, "client_id": p.client_id} if active else {"active": False})
            return
        if self.path == "/device":
            time.sleep(p.device_delay)
            device_code = "stub-dc-" + secrets.token_urlsafe(16)
            with p.lock:
                p.issued.append(device_code)
                p.grants[device_code] = form.get("resource", [])
            self._json(200, {"device_code": device_code, "user_code": "STUB-CODE",
                             "verification_uri": p.issuer + "/activate", "expires_in": p.device_expires_in,
                             "interval": p.device_interval})
            return
        if self.path in p.post_handlers:
            self._json(*p.post_handlers[self.path](form))
            return
        if self.path != p.token_path:
            self._json(404, {"error": "not_found"})
            return
        grant = form.get("grant_type", [""])[0]
        with p.lock:
            p.token_forms.append(form)
            p.token_requests += 1
            if grant == "refresh_token":
                p.refresh_requests += 1
        mode = p.mode
        if mode == "http500":
            self._raw(500, b"<html><body>Internal Server Error</body></html>", "text/html")
        elif mode == "garbage":
            self._raw(200, b"\x00\xffnot json {{{", "application/json")
        elif mode == "reset":
            self.close_connection = True
            self.connection.close()
        elif mode == "hang":
            p.released.wait(120)
        elif mode == "slow":
            p.released.wait(p.delay)
            self._json(200, p._tokens(with_id_token=False))  # too late: never kept
        elif grant == "urn:ietf:params:oauth:grant-type:device_code" and p.device_error:
            self._json(400, {"error": p.device_error})
        elif grant == "urn:ietf:params:oauth:grant-type:device_code":
            with p.lock:
                resources = p.grants.get(form.get("device_code", [""])[0], [])
            answer = p._tokens(with_id_token=p.device_id_token, resources=resources, grant=resources)
            p._keep(answer)
            if not p.device_refresh_token:
                answer.pop("refresh_token")
            self._json(200, answer)
        elif grant == "authorization_code":
            code = form.get("code", [""])[0]
            if p.code_verifier_check and not p.code_verifier_check(code, form.get("code_verifier", [""])[0]):
                self._json(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
                return
            with p.lock:
                resources = p.grants.pop(code, None)
                nonce = p.nonces.pop(code, None)
            if resources is None:
                self._json(400, {"error": "invalid_grant"})
                return
            answer = p._tokens(with_id_token=True, resources=resources, grant=resources, nonce=nonce)
            p._keep(answer)
            if p.code_answer_hold is not None:
                p.code_redeeming.set()
                p.code_answer_hold.wait(30)
            self._json(200, answer)
        elif grant == "refresh_token":
            presented = form.get("refresh_token", [""])[0]
            refusal = p.refresh_refusal(form) if p.refresh_refusal else None
            if refusal is not None:
                self._json(*refusal)
                return
            with p.lock:
                known = presented in p.valid_refresh
                if not p.valid_refresh_keep:
                    p.valid_refresh.discard(presented)
            if not known:
                self._json(400, {"error": "invalid_grant"})
                return
            with p.lock:
                grant_resources = p.grants.get(presented, [])
            asked = form.get("resource", [])
            resources = asked or (grant_resources if p.restrict_default_audience else [])
            answer = p._tokens(with_id_token=False, resources=resources, grant=grant_resources)
            p._keep(answer, presented=presented)
            for name, value in p.refresh_answer_extra.items():
                if value is None:
                    answer.pop(name, None)  # None: the member is left out
                else:
                    answer[name] = value
            if p.refresh_answer_delay:
                time.sleep(p.refresh_answer_delay)
            self._json(200, answer)
        elif grant in p.grant_handlers:
            self._json(*p.grant_handlers[grant](form))
        else:
            self._json(400, {"error": "unsupported_grant_type"})
