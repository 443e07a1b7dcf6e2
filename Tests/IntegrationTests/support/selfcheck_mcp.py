#!/usr/bin/env python3
"""Self-check of mcp_server.py against a real Glewlwyd with dynamic registration.

Starts `scripts/glewlwyd start DIR --dynamic-registration --resource URL` and
mcp_server.py in a temporary directory, registers a client (RFC 7591), signs alice
and bob in without a browser (authorization code + PKCE + resource), then talks to
the server with the MCP SDK's client and a static Authorization header. Stops both.
Exit status 0 = all good. Prints claims and statuses, never token values.

  python3 Tests/IntegrationTests/support/selfcheck_mcp.py [--keep]
"""

import asyncio
import base64
import hashlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.parse

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)

from glewlwyd_api import Glewlwyd, decode_jwt  # noqa: E402

REDIRECT = "http://127.0.0.1:18766/callback"  # never listened on: the code is read from Location
failures = []


def check(cond, what):
    print(("  ok   " if cond else "  FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sign_in(gw, client_id, user, scope, resource):
    """Authorization code + PKCE with `resource`, as `user`; the token response."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    location = gw.authorize_code(gw.login_session(user), client_id, REDIRECT, scope,
                                 "state", "nonce", challenge, resource=resource)
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["code"][0]
    r = gw.exchange_code(client_id, code, REDIRECT, verifier, resource)
    assert r.status == 200, (r.status, r.json)
    return r.json


async def mcp_session(url, token, work):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)


def post(url, token, body):
    """One raw JSON-RPC POST (no session), to see the HTTP status and headers."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=body, headers=headers, timeout=30)


def main():
    keep = "--keep" in sys.argv
    d = tempfile.mkdtemp(prefix="mcp-selfcheck-")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
    glewlwyd = os.path.join(ROOT, "scripts", "glewlwyd")
    server = None
    try:
        subprocess.run([glewlwyd, "start", d, "--dynamic-registration", "--resource", url],
                       check=True)
        gw = Glewlwyd(d)
        server = subprocess.Popen([sys.executable, os.path.join(HERE, "mcp_server.py"),
                                   "--port", str(port), "--issuer", gw.issuer,
                                   "--resource", url], stdout=subprocess.PIPE, text=True,
                                  stderr=open(os.path.join(d, "mcp_server.log"), "w"))
        check(server.stdout.readline().strip() == "ready", "mcp_server.py says ready")

        print("protected resource metadata, 401")
        prm = httpx.get(metadata_url).json()
        check(prm["resource"] == url and prm["authorization_servers"] == [gw.issuer],
              f"RFC 9728 metadata: {prm}")
        r = post(url, None, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        www = r.headers.get("www-authenticate", "")
        check(r.status_code == 401 and f'resource_metadata="{metadata_url}"' in www,
              f"no token: {r.status_code} {www}")

        print("registration (RFC 7591)")
        meta = {"application_type": "native", "token_endpoint_auth_method": "none",
                "response_types": ["code"], "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "client_name": "selfcheck_mcp", "scope": "openid offline_access mcp"}
        r = gw.register_client(dict(meta, client_confidential=False))
        check(r.status == 200 and "client_secret" not in r.json,
              f"public client registered: HTTP {r.status}, members {sorted(r.json)}")
        client_id = r.json["client_id"]
        r = gw.register_client(dict(meta, grant_types=[
            "authorization_code", "urn:ietf:params:oauth:grant-type:device_code"]))
        check(r.status == 400 and r.json["error"] == "invalid_client_metadata",
              f"device grant URN refused: HTTP {r.status}")

        print("sign-in and tokens")
        alice = sign_in(gw, client_id, "alice", "openid offline_access mcp mcp:admin", url)
        bob = sign_in(gw, client_id, "bob", "openid offline_access mcp mcp:admin", url)
        claims = decode_jwt(alice["access_token"])[1]
        check(claims["aud"] == url and claims["username"] == "alice",
              f"alice's token: aud={claims['aud']!r} username={claims['username']!r} "
              f"scope={claims['scope']!r}")
        check(bob["scope"] == "openid offline_access mcp", f"bob's scope: {bob['scope']!r}")

        print("MCP client (SDK, static Authorization header)")

        async def alice_work(s):
            tools = sorted(t.name for t in (await s.list_tools()).tools)
            who = (await s.call_tool("whoami", {})).structuredContent
            echo = (await s.call_tool("admin_echo", {"text": "hi"})).content[0].text
            return tools, who, echo
        tools, who, echo = asyncio.run(mcp_session(url, alice["access_token"], alice_work))
        check(tools == ["admin_echo", "whoami"], f"tools: {tools}")
        check(who["username"] == "alice" and who["client_id"] == client_id,
              f"whoami: {who}")
        check(echo == "hi", "admin_echo as alice (mcp:admin)")

        async def bob_work(s):
            return (await s.call_tool("whoami", {})).structuredContent
        check(asyncio.run(mcp_session(url, bob["access_token"], bob_work))["username"] == "bob",
              "whoami as bob")
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "admin_echo", "arguments": {"text": "hi"}}}
        r = post(url, bob["access_token"], call)
        www = r.headers.get("www-authenticate", "")
        check(r.status_code == 403 and 'error="insufficient_scope"' in www
              and 'scope="mcp:admin"' in www and metadata_url in www,
              f"admin_echo as bob: {r.status_code} {www}")

        other = sign_in(gw, client_id, "alice", "openid mcp", "https://api.example.test")
        r = post(url, other["access_token"], call)
        check(r.status_code == 401, f"token for another resource: {r.status_code}")
        no_mcp = sign_in(gw, client_id, "alice", "openid", url)
        r = post(url, no_mcp["access_token"], call)
        www = r.headers.get("www-authenticate", "")
        check(r.status_code == 403 and 'error="insufficient_scope"' in www
              and "Required scope: mcp" in www, f"token without scope mcp: {r.status_code} {www}")
    finally:
        if server:
            server.terminate()
            server.wait(10)
        subprocess.run([glewlwyd, "stop", d])
        if failures:
            with open(os.path.join(d, "mcp_server.log")) as f:
                print("mcp_server.py's stderr:\n" + f.read()[-3000:])
        if keep:
            print(f"kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)
    print("FAILED: " + "; ".join(failures) if failures else "all good")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
