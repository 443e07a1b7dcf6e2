#!/usr/bin/env python3
"""A real MCP server (official MCP Python SDK, FastMCP) protected by OAuth, for tests.

  python3 mcp_server.py --port N --issuer ISSUER_URL --resource URL \\
      [--required-scope mcp] [--admin-scope mcp:admin]

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
"""

import argparse
import asyncio
import json
import sys
import urllib.parse
import urllib.request

import jwt  # PyJWT, a dependency of mcp
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP

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
    return app


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
    args = ap.parse_args()
    return asyncio.run(serve(build_app(args), args.port))


if __name__ == "__main__":
    sys.exit(main())
