#!/usr/bin/env python3
"""A real MCP server (official MCP Python SDK, FastMCP) protected by OAuth, for tests.

  python3 mcp_server.py --port N --issuer ISSUER_URL --resource URL \\
      [--required-scope mcp] [--admin-scope mcp:admin] [--dpop]

Listens on 127.0.0.1:N and prints one line "ready" once it does. The MCP endpoint is
the path of --resource (http://127.0.0.1:N/mcp -> /mcp, streamable HTTP). The SDK's
resource-server support serves RFC 9728 metadata at the path-inserted URL
(/.well-known/oauth-protected-resource/mcp; nothing at the root one) naming --issuer as
the authorization server, and answers 401 with `WWW-Authenticate: Bearer
error="invalid_token", ..., resource_metadata="..."` without a valid token.

Tokens are checked here (JwtVerifier): a JWT signed by a key of the issuer's jwks_uri
(from ISSUER/.well-known/openid-configuration), `iss` = issuer, not expired, `aud`
holding --resource (Glewlwyd puts the one `resource` of the token request there, as a
string), and the --required-scope (the SDK answers 403 insufficient_scope without it).

Tools: whoami (the token's sub, username, client_id, scopes) and admin_echo, which
needs --admin-scope. The SDK checks scopes per endpoint only, so AdminScopeGate, a
small ASGI wrapper put between the SDK's RequireAuthMiddleware (401, and 403 for
--required-scope) and its MCP endpoint, reads each POST body and answers HTTP 403
`WWW-Authenticate: Bearer error="insufficient_scope", scope="mcp:admin",
resource_metadata="..."` to a tools/call of admin_echo whose token lacks that scope.

With --dpop the server takes DPoP-bound tokens only (RFC 9449): its metadata says
`dpop_bound_access_tokens_required: true` and `dpop_signing_alg_values_supported:
["ES256"]`, and DPoPGate, an ASGI wrapper outside the SDK's authentication, accepts a
request to the MCP endpoint only with `Authorization: DPoP <token>` and one valid `DPoP`
proof (§4.3: typ dpop+jwt, alg ES256 with its public jwk in the header, the signature,
htm the request's method, htu its URL without query or fragment, iat within 60 s, a jti
not seen before, ath the token's hash, and the token's cnf.jkt the key's RFC 7638
thumbprint). Anything else is a 401 `WWW-Authenticate: DPoP error="invalid_token",
algs="ES256", resource_metadata="..."`; each refusal's reason, and each request let
through, is a line on stderr ("mcp_server: DPoP refused M PATH: why", "mcp_server: DPoP
proof accepted for M PATH"). A request that passes goes on to the SDK as
`Authorization: Bearer <token>`, so that JwtVerifier still checks the token's signature,
issuer, audience and expiry; the SDK's own challenges (401, 403) go out with the DPoP
scheme.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import sys
import time
import urllib.parse
import urllib.request

import jwt  # PyJWT, a dependency of mcp
import uvicorn
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.routing import Route

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
              "ES256", "ES384", "ES512"]


class JwtVerifier:
    """mcp.server.auth.provider.TokenVerifier for the issuer's JWT access tokens."""

    def __init__(self, issuer, resource):
        url = issuer.rstrip("/") + "/.well-known/openid-configuration"
        with urllib.request.urlopen(url, timeout=10) as r:
            discovery = json.load(r)
        self.issuer = discovery["issuer"]
        self.resource = resource
        self.jwks = jwt.PyJWKClient(discovery["jwks_uri"], cache_keys=True)

    def _decode(self, token):
        key = self.jwks.get_signing_key_from_jwt(token).key
        return jwt.decode(token, key, algorithms=ALGORITHMS, issuer=self.issuer,
                          audience=self.resource,
                          options={"require": ["exp", "iss", "aud", "sub"]})

    async def verify_token(self, token):
        try:
            claims = await asyncio.to_thread(self._decode, token)
        except (jwt.PyJWTError, OSError) as e:
            print(f"mcp_server: token refused: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
            return None
        return AccessToken(token=token, client_id=claims.get("client_id", ""),
                           scopes=claims.get("scope", "").split(),
                           expires_at=claims["exp"], resource=self.resource,
                           subject=claims["sub"], claims=claims)


class AdminScopeGate:
    """ASGI wrapper (inside the SDK's authentication) that refuses a tools/call of
    one of `tools` with HTTP 403 unless the token has `scope`."""

    def __init__(self, app, tools, scope, metadata_url):
        self.app, self.tools, self.scope = app, set(tools), scope
        self.header = (f'Bearer error="insufficient_scope", scope="{scope}", '
                       f'resource_metadata="{metadata_url}"').encode()

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if (scope["type"] != "http" or scope["method"] != "POST"
                or not isinstance(user, AuthenticatedUser)
                or self.scope in user.scopes):
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if self._calls_gated_tool(body):
            payload = json.dumps({"error": "insufficient_scope", "error_description":
                                  f"Required scope: {self.scope}"}).encode()
            await send({"type": "http.response.start", "status": 403, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"www-authenticate", self.header)]})
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        await self.app(scope, replay, send)

    def _calls_gated_tool(self, body):
        try:
            messages = json.loads(body)
        except ValueError:
            return False
        for m in messages if isinstance(messages, list) else [messages]:
            if (isinstance(m, dict) and m.get("method") == "tools/call"
                    and (m.get("params") or {}).get("name") in self.tools):
                return True
        return False


def _b64d(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64e(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _origin_and_path(url):
    """A URL compared as RFC 9449 §4.3 says (RFC 3986 §6 normalisation, no query or
    fragment): scheme and host in lower case, the default port left out."""
    u = urllib.parse.urlsplit(url)
    scheme = u.scheme.lower()
    port = u.port if u.port not in (None, {"http": 80, "https": 443}.get(scheme)) else None
    host = (u.hostname or "").lower()
    return f"{scheme}://{host}{'' if port is None else f':{port}'}{u.path or '/'}"


class Refused(Exception):
    pass


class DPoPGate:
    """ASGI wrapper of the whole app: requests to `path` need a DPoP-bound token and a
    valid proof (module docstring); they go on as Bearer requests."""

    MAX_AGE = 60

    def __init__(self, app, path, metadata_url):
        self.app, self.path = app, path
        self.params = f'algs="ES256", resource_metadata="{metadata_url}"'
        self.seen = set()  # the jti of every proof accepted so far

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != self.path:
            return await self.app(scope, receive, send)
        headers = scope["headers"]
        try:
            token = self._check(scope, [v for k, v in headers if k == b"authorization"],
                                [v for k, v in headers if k == b"dpop"])
        except Refused as e:
            print(f"mcp_server: DPoP refused {scope['method']} {scope['path']}: {e}",
                  file=sys.stderr, flush=True)
            return await self._refuse(send, str(e))
        print(f"mcp_server: DPoP proof accepted for {scope['method']} {scope['path']}",
              file=sys.stderr, flush=True)
        rest = [(k, v) for k, v in headers if k not in (b"authorization", b"dpop")]
        scope = dict(scope, headers=rest + [(b"authorization", b"Bearer " + token.encode())])
        await self.app(scope, receive, self._dpop_challenges(send))

    def _check(self, scope, authorization, proofs):
        """The token of a request that passes; Refused with the reason otherwise."""
        if len(authorization) != 1:
            raise Refused("no Authorization header" if not authorization else "several Authorization headers")
        scheme, _, token = authorization[0].decode("latin-1").partition(" ")
        if scheme.lower() != "dpop" or not token.strip():
            raise Refused(f"Authorization scheme {scheme!r}, not DPoP")
        token = token.strip()
        if len(proofs) != 1:
            raise Refused("no DPoP proof" if not proofs else "several DPoP proofs")
        try:
            h64, c64, s64 = proofs[0].decode("ascii").split(".")
            header, claims, signature = json.loads(_b64d(h64)), json.loads(_b64d(c64)), _b64d(s64)
        except (ValueError, UnicodeDecodeError) as e:
            raise Refused(f"the proof is no JWT: {e}") from None
        if header.get("typ") != "dpop+jwt":
            raise Refused(f"typ {header.get('typ')!r}")
        if header.get("alg") != "ES256":
            raise Refused(f"alg {header.get('alg')!r}, not ES256")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or "d" in jwk:
            raise Refused("no public P-256 jwk in the proof's header")
        try:
            key = ec.EllipticCurvePublicNumbers(int.from_bytes(_b64d(jwk["x"]), "big"),
                                                int.from_bytes(_b64d(jwk["y"]), "big"),
                                                ec.SECP256R1()).public_key()
            if len(signature) != 64:
                raise InvalidSignature
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.verify(der, (h64 + "." + c64).encode(), ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, KeyError, TypeError, ValueError):
            raise Refused("the proof's signature does not verify with its jwk") from None
        if claims.get("htm") != scope["method"]:
            raise Refused(f"htm {claims.get('htm')!r} for a {scope['method']}")
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        url = f"{scope['scheme']}://{host}{scope['path']}"
        htu = claims.get("htu")
        if not isinstance(htu, str) or _origin_and_path(htu) != _origin_and_path(url):
            raise Refused(f"htu {htu!r} for {url}")
        iat = claims.get("iat")
        if not isinstance(iat, (int, float)) or abs(time.time() - iat) > self.MAX_AGE:
            raise Refused(f"iat {iat!r} is not within {self.MAX_AGE} s of now")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise Refused("no jti")
        if jti in self.seen:
            raise Refused("a replayed proof (its jti was seen before)")
        if claims.get("ath") != _b64e(hashlib.sha256(token.encode("ascii", "replace")).digest()):
            raise Refused("ath is not the hash of the token")
        # Read unverified here; JwtVerifier checks the same token's signature next.
        try:
            cnf = jwt.decode(token, options={"verify_signature": False}).get("cnf") or {}
        except jwt.PyJWTError as e:
            raise Refused(f"the token is no JWT: {e}") from None
        required = {k: jwk[k] for k in ("crv", "kty", "x", "y")}
        thumbprint = _b64e(hashlib.sha256(json.dumps(required, separators=(",", ":"), sort_keys=True).encode()).digest())
        if not cnf.get("jkt"):
            raise Refused("the token is not DPoP-bound (no cnf.jkt)")
        if cnf["jkt"] != thumbprint:
            raise Refused("the token is not bound to the proof's key")
        self.seen.add(jti)
        return token

    async def _refuse(self, send, reason):
        payload = json.dumps({"error": "invalid_token", "error_description": reason}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"www-authenticate", f'DPoP error="invalid_token", {self.params}'.encode())]})
        await send({"type": "http.response.body", "body": payload})

    def _dpop_challenges(self, send):
        """The SDK's and AdminScopeGate's Bearer challenges, sent as DPoP ones."""
        async def sending(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=[
                    (k, b"DPoP " + v[len(b"Bearer "):] + b", algs=\"ES256\"")
                    if k.lower() == b"www-authenticate" and v.startswith(b"Bearer ") else (k, v)
                    for k, v in message.get("headers", [])])
            await send(message)
        return sending


def build_app(args):
    path = urllib.parse.urlsplit(args.resource).path or "/mcp"
    auth = AuthSettings(issuer_url=args.issuer, resource_server_url=args.resource,
                        required_scopes=[args.required_scope] if args.required_scope else None,
                        validate_token_resource=True)
    mcp = FastMCP("authbroker-test-mcp", token_verifier=JwtVerifier(args.issuer, args.resource),
                  auth=auth, host="127.0.0.1", port=args.port, streamable_http_path=path,
                  log_level="WARNING")

    @mcp.tool()
    def whoami() -> dict[str, object]:
        """Who the bearer token was issued to."""
        t = get_access_token()
        return {"sub": t.subject, "username": (t.claims or {}).get("username"),
                "client_id": t.client_id, "scopes": t.scopes}

    @mcp.tool()
    def admin_echo(text: str) -> str:
        """Echo `text`; needs the admin scope."""
        # AdminScopeGate checked the request's own token. Not get_access_token() here: the
        # SDK runs a session's tools in a task made under the session's first request, whose
        # token (an earlier, narrower one) that context still holds.
        return text

    app = mcp.streamable_http_app()
    metadata_url = build_resource_metadata_url(auth.resource_server_url)
    for route in app.routes:  # Route(path, RequireAuthMiddleware(StreamableHTTPASGIApp))
        if getattr(route, "path", None) == path:
            route.app.app = AdminScopeGate(route.app.app, ["admin_echo"], args.admin_scope,
                                           metadata_url)
    if not args.dpop:
        return app
    # The SDK's metadata route says nothing of DPoP and takes no option for it: replaced.
    well_known = urllib.parse.urlsplit(str(metadata_url)).path
    metadata = ProtectedResourceMetadata(
        resource=auth.resource_server_url, authorization_servers=[auth.issuer_url],
        scopes_supported=auth.required_scopes, dpop_bound_access_tokens_required=True,
        dpop_signing_alg_values_supported=["ES256"])
    routes = app.router.routes
    for i, route in enumerate(routes):
        if getattr(route, "path", None) == well_known:
            routes[i] = Route(well_known, endpoint=cors_middleware(
                ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"])
            break
    else:
        raise SystemExit(f"mcp_server: the SDK serves no metadata at {well_known}")
    return DPoPGate(app, path, metadata_url)


async def serve(app, port):
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            return 1
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    await task
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--issuer", required=True, help="e.g. http://127.0.0.1:P/api/oidc")
    ap.add_argument("--resource", required=True, help="e.g. http://127.0.0.1:N/mcp")
    ap.add_argument("--required-scope", default="mcp", help="'' for none (default mcp)")
    ap.add_argument("--admin-scope", default="mcp:admin")
    ap.add_argument("--dpop", action="store_true",
                    help="take DPoP-bound tokens (ES256 proofs) only")
    args = ap.parse_args()
    return asyncio.run(serve(build_app(args), args.port))


if __name__ == "__main__":
    sys.exit(main())
