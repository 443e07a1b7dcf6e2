"""Helpers for integration tests that talk to the real Glewlwyd fixture.

Start the provider with `scripts/glewlwyd start DIR`, then:

    from glewlwyd_api import Glewlwyd
    gw = Glewlwyd("DIR/env.json")          # or Glewlwyd("DIR")
    s = gw.login_session("alice")          # password taken from env.json
    gw.approve_device(s, user_code, gw.client_id("authbroker"),
                      ["openid", "offline_access"])

Python 3 standard library only. Nothing here prints token values.
See docs/testing.md for the Glewlwyd behaviour these helpers rely on.

Glewlwyd facts worth knowing (verified against Debian's glewlwyd 2.7.5):
  * refresh tokens are one-time use ("refresh-token-one-use": "always"): every
    successful refresh returns a new refresh_token and disables the old one;
    re-using a disabled refresh token gets HTTP 400 with an EMPTY body and
    also disables the newest token of that chain (replay detection).
  * one `resource` per token request; the access token's `aud` claim is then
    the resource string (not a list). Without `resource`, `aud` is the scope
    list string.
  * `scope` on a refresh request is ignored.
  * redirect URIs are matched exactly, including the port (see docs).
"""

import base64
import hashlib
import json
import os
import sqlite3
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Glewlwyd", "Session", "GlewlwydError", "HttpResult", "decode_jwt",
           "token_hash", "AUTH_TYPE"]

# gp*_authorization_type values stored in the database (glewlwyd.h)
AUTH_TYPE = {
    "code": 0, "token": 1, "id_token": 2, "none": 3, "password": 4,
    "client_credentials": 5, "refresh_token": 6, "delete_token": 7,
    "device_authorization": 8, "ciba": 9,
}
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


def _b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def decode_jwt(token):
    """Return (header, payload) of a JWS compact token, WITHOUT verifying it."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWS compact token")
    return (json.loads(_b64url_decode(parts[0])),
            json.loads(_b64url_decode(parts[1])))


def token_hash(token):
    """The value Glewlwyd stores for a token (hash_algorithm = SHA512)."""
    digest = hashlib.sha512(token.encode()).digest()
    return "{SHA512}" + base64.b64encode(digest).decode()


class HttpResult:
    """status: int, headers: http.client.HTTPMessage, body: bytes,
    json: parsed body or None, location: Location header or None."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        self.location = headers.get("Location") if headers else None
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def __repr__(self):  # never include the body: it may hold tokens
        return f"<HttpResult {self.status} {len(self.body)} bytes>"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _request(method, url, *, form=None, json_body=None, headers=None,
             cookies=None, timeout=30):
    data = None
    hdrs = dict(headers or {})
    if form is not None:
        data = urllib.parse.urlencode(form, doseq=True).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    elif json_body is not None:
        data = json.dumps(json_body).encode()
        hdrs["Content-Type"] = "application/json"
    if cookies:
        hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with _OPENER.open(req, timeout=timeout) as r:
            res = HttpResult(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        res = HttpResult(e.code, e.headers, e.read())
    if cookies is not None and res.headers is not None:
        for h in res.headers.get_all("Set-Cookie") or []:
            name, _, rest = h.partition("=")
            cookies[name.strip()] = rest.split(";", 1)[0].strip()
    return res


def _basic(client_id, secret):
    raw = (urllib.parse.quote(client_id, safe="") + ":" +
           urllib.parse.quote(secret, safe="")).encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


class GlewlwydError(RuntimeError):
    """An unexpected answer; .status is the HTTP status (or None)."""

    def __init__(self, msg, status=None):
        super().__init__(msg)
        self.status = status


class Session:
    """A signed-in browser session of one user (Glewlwyd session cookies)."""

    def __init__(self, username):
        self.username = username
        self.cookies = {}

    def __repr__(self):
        return f"<Session {self.username}>"


class Glewlwyd:
    def __init__(self, env_path):
        if os.path.isdir(env_path):
            env_path = os.path.join(env_path, "env.json")
        with open(env_path) as f:
            self.env = json.load(f)
        self.issuer = self.env["issuer"]
        self.base_url = self.env["base_url"]
        self.db_path = self.env["db"]
        self.resources = list(self.env["resources"])
        d = self.env.get("discovery") or self.discovery()
        self.authorization_endpoint = d["authorization_endpoint"]
        self.token_endpoint = d["token_endpoint"]
        self.device_authorization_endpoint = d["device_authorization_endpoint"]
        self.revocation_endpoint = d["revocation_endpoint"]
        self.introspection_endpoint = d.get("introspection_endpoint")
        self.end_session_endpoint = d.get("end_session_endpoint")
        self.jwks_uri = d["jwks_uri"]
        self.device_endpoint = self.issuer + "/device"

    # ---------------------------------------------------------------- env
    def discovery(self):
        r = _request("GET", self.issuer + "/.well-known/openid-configuration")
        assert r.status == 200, r
        return r.json

    def client_id(self, name):
        return self.env["clients"][name]["client_id"]

    def client_secret(self, name):
        return self.env["clients"][name].get("client_secret")

    def _secret_for(self, client_id):
        for c in self.env["clients"].values():
            if c["client_id"] == client_id:
                return c.get("client_secret")
        return None

    def user_password(self, user):
        return self.env["users"][user]["password"]

    # --------------------------------------------------------- admin API
    def admin_request(self, method, path, body=None):
        """Admin REST call authenticated with the fixture's API key
        (header `Authorization: token <key>`). path like "/api/client/x"."""
        return _request(method, self.base_url + path, json_body=body,
                        headers={"Authorization":
                                 "token " + self.env["admin"]["api_key"]})

    def set_redirect_uris(self, name_or_id, uris):
        """Replace a client's registered redirect URIs. Glewlwyd matches
        redirect_uri EXACTLY (scheme, host, port, path), so a test using a
        loopback listener on an ephemeral port must register that exact URI
        first (RFC 8252 'any port' is not supported)."""
        cid = self.env["clients"].get(name_or_id, {}).get("client_id",
                                                           name_or_id)
        path = "/api/client/" + urllib.parse.quote(cid, safe="")
        r = self.admin_request("GET", path)
        if r.status != 200:
            raise GlewlwydError(f"GET client {cid}: HTTP {r.status}")
        client = r.json
        client["redirect_uri"] = list(uris)
        client.pop("source", None)
        r = self.admin_request("PUT", path, client)
        if r.status != 200:
            raise GlewlwydError(f"PUT client {cid}: HTTP {r.status} {r.body[:300]!r}")

    def add_redirect_uri(self, name_or_id, uri):
        cid = self.env["clients"].get(name_or_id, {}).get("client_id",
                                                           name_or_id)
        r = self.admin_request("GET", "/api/client/" +
                               urllib.parse.quote(cid, safe=""))
        uris = list(r.json.get("redirect_uri") or [])
        if uri not in uris:
            self.set_redirect_uris(cid, uris + [uri])

    def register_client(self, metadata):
        """RFC 7591 registration (scripts/glewlwyd start --dynamic-registration), no
        initial access token. Returns HttpResult: 200 (not 201) with the metadata
        echoed plus client_id, registration_access_token, registration_client_uri, and
        client_secret for a client_secret_* auth method. NOTE Glewlwyd 2.7.5 stores a
        client registered with token_endpoint_auth_method "none" as CONFIDENTIAL
        (without a secret: its token requests get 403 unauthorized_client) unless the
        metadata also has Glewlwyd's "client_confidential": false."""
        return _request("POST", self.env["registration_endpoint"],
                        json_body=metadata)

    # ------------------------------------------------------ user sessions
    def login_session(self, user, password=None):
        """POST /api/auth/ with the user's password; returns a Session."""
        s = Session(user)
        r = _request("POST", self.base_url + "/api/auth/",
                     json_body={"username": user,
                                "password": password or self.user_password(user)},
                     cookies=s.cookies)
        if r.status != 200:
            raise GlewlwydError(f"login of {user} failed: HTTP {r.status}")
        return s

    def grant_scopes(self, session, client_id, scopes):
        """What the consent screen does: PUT /api/auth/grant/<client_id>
        with {"scope": "a b c"} (SPACE separated; a comma list gets 401)."""
        if isinstance(scopes, str):
            scopes = scopes.split()
        r = _request("PUT", self.base_url + "/api/auth/grant/" +
                     urllib.parse.quote(client_id, safe=""),
                     json_body={"scope": " ".join(scopes)},
                     cookies=session.cookies)
        if r.status != 200:
            raise GlewlwydError(f"grant failed: HTTP {r.status}")

    def approve_device(self, session, user_code, client_id, scopes):
        """Grant `scopes` to `client_id` and approve `user_code` as the
        session's user (GET /api/oidc/device?code=<user_code>&g_continue=).
        Glewlwyd answers 302 to login.html?...&prompt=deviceComplete on
        success, prompt=deviceCodeError for an unknown/used code. Returns the
        prompt value; raises RuntimeError unless it is deviceComplete."""
        self.grant_scopes(session, client_id, scopes)
        r = _request("GET", self.device_endpoint + "?" + urllib.parse.urlencode(
            {"code": user_code, "g_continue": ""}), cookies=session.cookies)
        prompt = None
        if r.location:
            q = urllib.parse.parse_qs(urllib.parse.urlsplit(r.location).query)
            prompt = (q.get("prompt") or [None])[0]
        if r.status != 302 or prompt != "deviceComplete":
            raise GlewlwydError(f"device approval failed: HTTP {r.status}, "
                               f"prompt={prompt}")
        return prompt

    def authorize_code(self, session, client_id, redirect_uri, scope, state,
                       nonce, code_challenge, resource=None, extra=None,
                       code_challenge_method="S256", grant=True):
        """Run the authorization endpoint as the signed-in user and return the
        final redirect Location (redirect_uri?code=...&state=...) WITHOUT
        following it. With grant=True the scopes are granted first (otherwise
        Glewlwyd redirects to its login/consent page, which is returned as
        is). `extra` adds/overrides query parameters (e.g. prompt)."""
        if isinstance(scope, (list, tuple)):
            scope = " ".join(scope)
        if grant:
            self.grant_scopes(session, client_id, scope.split())
        q = {"response_type": "code", "client_id": client_id,
             "redirect_uri": redirect_uri, "scope": scope, "g_continue": ""}
        if state is not None:
            q["state"] = state
        if nonce is not None:
            q["nonce"] = nonce
        if code_challenge is not None:
            q["code_challenge"] = code_challenge
            q["code_challenge_method"] = code_challenge_method
        if resource is not None:
            q["resource"] = resource
        q.update(extra or {})
        r = _request("GET", self.authorization_endpoint + "?" +
                     urllib.parse.urlencode(q), cookies=session.cookies)
        if r.status not in (301, 302, 303, 307) or not r.location:
            # e.g. 403 for a redirect_uri that is not registered exactly
            raise GlewlwydError(f"authorization endpoint answered HTTP "
                                f"{r.status} without a redirect", r.status)
        return r.location

    # ------------------------------------------------------ token endpoint
    def token_request(self, params, client_id=None, client_secret=None,
                      auth="basic"):
        """POST to the token endpoint. For a confidential client pass its
        secret (auth="basic" or "post"); a public client sends client_id in
        the form. Returns HttpResult (.status, .json)."""
        form = dict(params)
        headers = {}
        if client_secret is not None and auth == "basic":
            headers.update(_basic(client_id, client_secret))
        else:
            if client_id is not None:
                form["client_id"] = client_id
            if client_secret is not None:
                form["client_secret"] = client_secret
        return _request("POST", self.token_endpoint, form=form,
                        headers=headers)

    def refresh(self, client_id, refresh_token, resource=None,
                client_secret=None, scope=None):
        """grant_type=refresh_token. CONSUMES refresh_token (rotation)."""
        if client_secret is None:
            client_secret = self._secret_for(client_id)
        p = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if resource is not None:
            p["resource"] = resource
        if scope is not None:
            p["scope"] = scope
        return self.token_request(p, client_id, client_secret)

    def refresh_token_works(self, client_id, refresh_token, resource=None,
                            client_secret=None):
        """True if a refresh with this token succeeds.
        WARNING: this CONSUMES the token (one-time use): on success the token
        is disabled and the new one is thrown away; on failure with a token
        that was already used, Glewlwyd also disables the newest token of the
        chain (replay detection). Prefer refresh_token_enabled() to look
        without touching anything."""
        return self.refresh(client_id, refresh_token, resource,
                            client_secret).status == 200

    def exchange_code(self, client_id, code, redirect_uri, code_verifier=None,
                      resource=None, client_secret=None):
        if client_secret is None:
            client_secret = self._secret_for(client_id)
        p = {"grant_type": "authorization_code", "code": code,
             "redirect_uri": redirect_uri}
        if code_verifier is not None:
            p["code_verifier"] = code_verifier
        if resource is not None:
            p["resource"] = resource
        return self.token_request(p, client_id, client_secret)

    def client_credentials(self, name_or_id, scope="api", resource=None):
        cid = self.env["clients"].get(name_or_id, {}).get("client_id",
                                                           name_or_id)
        p = {"grant_type": "client_credentials", "scope": scope}
        if resource is not None:
            p["resource"] = resource
        return self.token_request(p, cid, self._secret_for(cid))

    def device_authorize(self, client_id, scopes, resource=None,
                         client_secret=None):
        """POST device_authorization; returns HttpResult."""
        if isinstance(scopes, (list, tuple)):
            scopes = " ".join(scopes)
        if client_secret is None:
            client_secret = self._secret_for(client_id)
        form = {"scope": scopes}
        if resource is not None:
            form["resource"] = resource
        headers = {}
        if client_secret is not None:
            headers.update(_basic(client_id, client_secret))
        else:
            form["client_id"] = client_id
        return _request("POST", self.device_authorization_endpoint,
                        form=form, headers=headers)

    def poll_device(self, client_id, device_code, interval=1, timeout=30,
                    client_secret=None):
        """Poll the token endpoint until the device code is approved/denied.
        Returns the final HttpResult (200 or a non-pending error)."""
        if client_secret is None:
            client_secret = self._secret_for(client_id)
        deadline = time.monotonic() + timeout
        while True:
            r = self.token_request({"grant_type": DEVICE_GRANT,
                                    "device_code": device_code},
                                   client_id, client_secret)
            err = (r.json or {}).get("error")
            if r.status == 200 or err not in ("authorization_pending",
                                              "slow_down"):
                return r
            if time.monotonic() > deadline:
                return r
            if err == "slow_down":
                interval += 1
            time.sleep(interval)

    def device_flow_tokens(self, client_id, scopes, resources=None,
                           user="alice"):
        """Whole device flow over plain HTTP: start (with the first resource
        of `resources`, or none), approve as `user`, poll. Returns the token
        response dict. Glewlwyd takes one resource per request; use
        refresh(..., resource=...) for the other ones."""
        if isinstance(resources, str):
            resources = [resources]
        resource = resources[0] if resources else None
        if isinstance(scopes, str):
            scopes = scopes.split()
        r = self.device_authorize(client_id, scopes, resource)
        if r.status != 200:
            raise GlewlwydError(f"device_authorization: HTTP {r.status} "
                               f"{(r.json or {}).get('error')}")
        da = r.json
        # Do not poll before approval: poll only once the user has approved.
        s = self.login_session(user)
        self.approve_device(s, da["user_code"], client_id, scopes)
        t = self.poll_device(client_id, da["device_code"],
                             interval=da.get("interval", 1))
        if t.status != 200:
            raise GlewlwydError(f"device token: HTTP {t.status} "
                               f"{(t.json or {}).get('error')}")
        return t.json

    def revoke(self, token, client_id, client_secret=None,
               token_type_hint="refresh_token"):
        """RFC 7009 revocation. Returns HttpResult. Only clients with the
        client_credentials grant and a secret may call it (see docs)."""
        form = {"token": token, "token_type_hint": token_type_hint}
        return self._client_post(self.revocation_endpoint, form, client_id,
                                 client_secret)

    def introspect(self, token, client_id, client_secret=None,
                   token_type_hint=None):
        form = {"token": token}
        if token_type_hint:
            form["token_type_hint"] = token_type_hint
        return self._client_post(self.introspection_endpoint, form, client_id,
                                 client_secret)

    def _client_post(self, endpoint, form, client_id, client_secret):
        """POST as the client: HTTP Basic with its secret (looked up when not
        given), or client_id in the form for a public client."""
        headers = {}
        if client_secret is None:
            client_secret = self._secret_for(client_id)
        if client_secret is not None:
            headers.update(_basic(client_id, client_secret))
        else:
            form = dict(form, client_id=client_id)
        return _request("POST", endpoint, form=form, headers=headers)

    # ------------------------------------------------------------ database
    def _db(self):
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True,
                               timeout=10)
        conn.row_factory = sqlite3.Row
        return conn

    def refresh_token_state(self, refresh_token):
        """Database row for a refresh token (looked up by its SHA512 hash):
        dict(id, client_id, username, resource, enabled, issued_at,
        last_seen, expires_at, authorization_type, scopes) or None."""
        with self._db() as conn:
            row = conn.execute(
                "SELECT gpor_id, gpor_client_id, gpor_username, gpor_resource,"
                " gpor_enabled, gpor_issued_at, gpor_last_seen,"
                " gpor_expires_at, gpor_authorization_type"
                " FROM gpo_refresh_token WHERE gpor_token_hash = ? "
                " AND gpor_plugin_name = ?",
                (token_hash(refresh_token), self.env["plugin"])).fetchone()
            if row is None:
                return None
            scopes = [r[0] for r in conn.execute(
                "SELECT gpors_scope FROM gpo_refresh_token_scope"
                " WHERE gpor_id = ?", (row["gpor_id"],))]
        return {"id": row["gpor_id"], "client_id": row["gpor_client_id"],
                "username": row["gpor_username"],
                "resource": row["gpor_resource"],
                "enabled": bool(row["gpor_enabled"]),
                "issued_at": row["gpor_issued_at"],
                "last_seen": row["gpor_last_seen"],
                "expires_at": row["gpor_expires_at"],
                "authorization_type": row["gpor_authorization_type"],
                "scopes": scopes}

    def refresh_token_enabled(self, refresh_token):
        """True/False from the database without using the token; None if
        Glewlwyd never issued it."""
        st = self.refresh_token_state(refresh_token)
        return None if st is None else st["enabled"]

    def access_token_enabled(self, access_token):
        with self._db() as conn:
            row = conn.execute(
                "SELECT gpoa_enabled FROM gpo_access_token"
                " WHERE gpoa_token_hash = ?",
                (token_hash(access_token),)).fetchone()
        return None if row is None else bool(row[0])

    def count_token_events(self, since_epoch=0, client_id=None,
                           username=None):
        """Token activity recorded by Glewlwyd at or after `since_epoch`
        (integer seconds; Glewlwyd stores whole seconds, so take
        `int(time.time())` BEFORE the action under test). Returns

          {"access_tokens": {aud: n},   # all access tokens issued, by aud
           "refreshes": {aud: n},       # grant_type=refresh_token successes
           "device": {aud: n},          # access tokens from device_code
           "code": {aud: n},            # access tokens from authorization_code
           "client_credentials": {aud: n},
           "refresh_tokens_issued": n,  # new refresh tokens (incl. rotation)
           "refresh_tokens_disabled": n}  # of those issued since, now disabled

        `aud` is the resource (gpoa_resource) or "" when none was given.
        One successful refresh == one access token with authorization type
        refresh_token, so "refreshes" is "how many refreshes per resource"."""
        where = ["gpoa_issued_at >= ?", "gpoa_plugin_name = ?"]
        args = [int(since_epoch), self.env["plugin"]]
        if client_id is not None:
            where.append("gpoa_client_id = ?")
            args.append(client_id)
        if username is not None:
            where.append("gpoa_username = ?")
            args.append(username)
        out = {"access_tokens": {}, "refreshes": {}, "device": {}, "code": {},
               "client_credentials": {}, "refresh_tokens_issued": 0,
               "refresh_tokens_disabled": 0}
        by_type = {AUTH_TYPE["refresh_token"]: "refreshes",
                   AUTH_TYPE["device_authorization"]: "device",
                   AUTH_TYPE["code"]: "code",
                   AUTH_TYPE["client_credentials"]: "client_credentials"}
        with self._db() as conn:
            for typ, aud, n in conn.execute(
                    "SELECT gpoa_authorization_type, COALESCE(gpoa_resource,''),"
                    " COUNT(*) FROM gpo_access_token WHERE " +
                    " AND ".join(where) + " GROUP BY 1, 2", args):
                out["access_tokens"][aud] = out["access_tokens"].get(aud, 0) + n
                key = by_type.get(typ)
                if key:
                    out[key][aud] = out[key].get(aud, 0) + n
            rwhere = [w.replace("gpoa_", "gpor_") for w in where]
            row = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(gpor_enabled = 0), 0)"
                " FROM gpo_refresh_token WHERE " + " AND ".join(rwhere),
                args).fetchone()
            out["refresh_tokens_issued"] = row[0]
            out["refresh_tokens_disabled"] = row[1]
        return out
